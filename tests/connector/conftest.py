"""Fixtures shared by the tool tests that drive the connector with the ``mcp`` SDK's client while a
phone answers over the REST API, all in one event loop (the fan-out wakes waiters of one loop)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from mcp import Client

from app.assembly import create_app
from connector.mcp_server import build_mcp
from core.domain.keys import generate_keypair
from core.runtime.core import Core
from tests.connector.mcp_calls import grant
from tests.helpers import FakeDevice, b64


@pytest.fixture
async def rest(core: Core) -> AsyncIterator[httpx.AsyncClient]:
    """The REST API the phone uses, served by ``core`` (started for the test)."""
    transport = httpx.ASGITransport(app=create_app(core=core))
    async with core, httpx.AsyncClient(transport=transport, base_url="http://relaybox.test") as client:
        yield client


@pytest.fixture
async def phone(rest: httpx.AsyncClient) -> FakeDevice:
    """A phone named Pixel, registered over ``rest``."""
    secret, public = generate_keypair()
    body = {"public_key": b64(public), "name": "Pixel", "app_build": 1}
    created = (await rest.post("/v1/devices", json=body)).json()
    return FakeDevice(created["device_id"], created["device_token"], secret, public, created["account_id"])


@pytest.fixture
async def assistant(core: Core, phone: FakeDevice) -> AsyncIterator[Client]:
    """An MCP client with a connector grant on the phone's account holding every connector scope."""
    async with Client(build_mcp(core, lambda: grant(phone))) as session:
        yield session
