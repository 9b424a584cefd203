"""Setting up the devices a benchmark run needs, over relaybox's HTTP API: the request bodies
that register a phone and pair a computer with it, and the checks on the answers.

The scripts import it as ``devices`` (``bench/`` is on ``sys.path``); it is not a benchmark. The
requests themselves stay in the scripts, which send them with a sync or async httpx client or
their own raw HTTP/1.1 client as each needs.
"""

from __future__ import annotations

import base64
from typing import Any

import httpx

from harness import BenchError


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def expect(response: httpx.Response, status: int) -> dict[str, Any]:
    """The JSON body of a response that has ``status``; a BenchError naming the request otherwise."""
    if response.status_code != status:
        request = response.request
        raise BenchError(f"{request.method} {request.url.path}: {response.status_code} {response.text[:200]}")
    body: dict[str, Any] = response.json()
    return body


def phone_request(public_key: bytes, name: str) -> dict[str, str]:
    """``POST /v1/devices``: a phone, and with it a new account (201: its id and device token)."""
    return {"public_key": b64(public_key), "name": name}


def pair_init_request(public_key: bytes, name: str) -> dict[str, str]:
    """``POST /v1/pair/init``, unauthenticated: a computer asks to pair (201: the code to confirm)."""
    return {"public_key": b64(public_key), "surface_kind": "cli", "name": name}


def pair_confirm_request(code: str, phone_public_key: bytes) -> dict[str, str]:
    """``POST /v1/pair/confirm`` with the phone's bearer token: it confirms the code (200)."""
    return {"code": code, "public_key": b64(phone_public_key)}


def register_phone(api: httpx.Client, public_key: bytes, name: str) -> dict[str, str]:
    """Register a phone; the bearer header of its device token."""
    phone = expect(api.post("/v1/devices", json=phone_request(public_key, name)), 201)
    return bearer(phone["device_token"])
