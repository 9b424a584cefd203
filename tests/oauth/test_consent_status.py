"""The consent page's status long-poll, over a real socket: it returns the moment the phone
confirms (a fan-out event, not a database loop), and after its wait when nothing happens."""

from __future__ import annotations

import time

import anyio
import httpx
import pytest

from core.runtime.core import Core
from core.services import consent
from tests.helpers import register_phone
from tests.oauth.flow import Authorization, confirm_on_phone, open_consent, register_client

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_waiting_status_returns_as_soon_as_the_phone_confirms(live_server: str, core: Core) -> None:
    with httpx.Client(base_url=live_server, timeout=10) as browser:
        phone = register_phone(browser)
        page = open_consent(browser, Authorization(register_client(browser)["client_id"]).url())
        confirmed_at: list[float] = []

        async def confirm_later() -> None:
            await anyio.sleep(0.3)
            confirmed_at.append(time.monotonic())
            response = await anyio.to_thread.run_sync(lambda: confirm_on_phone(browser, phone, page.code))
            assert response.status_code == 200

        async with (
            httpx.AsyncClient(base_url=live_server, timeout=30, cookies=browser.cookies) as poller,
            anyio.create_task_group() as tasks,
        ):
            tasks.start_soon(confirm_later)
            with anyio.fail_after(10):
                status = await poller.get(page.status_url, params={"wait": 20})
            returned_at = time.monotonic()
    assert status.json()["status"] == "confirmed"
    assert returned_at - confirmed_at[0] < 1.0


async def test_a_wait_in_other_digits_is_no_wait_not_a_500(live_server: str) -> None:
    """ "²" is a digit to str.isdigit, not to int(): it was a 500."""
    with httpx.Client(base_url=live_server, timeout=10) as browser:
        page = open_consent(browser, Authorization(register_client(browser)["client_id"]).url())
        status = browser.get(page.status_url, params={"wait": "\u00b2"})
    assert status.status_code == 200 and status.json()["status"] == "pending"


async def test_a_status_with_nothing_happening_returns_pending_after_its_wait(live_server: str) -> None:
    with httpx.Client(base_url=live_server, timeout=10) as browser:
        page = open_consent(browser, Authorization(register_client(browser)["client_id"]).url())
        started = time.monotonic()
        async with httpx.AsyncClient(base_url=live_server, timeout=30, cookies=browser.cookies) as poller:
            with anyio.fail_after(10):
                status = await poller.get(page.status_url, params={"wait": 1})
    assert status.json()["status"] == "pending"
    assert 0.9 < time.monotonic() - started < 5


async def test_a_waiting_status_reads_the_session_only_before_and_after_its_wait(
    live_server: str, core: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    real = consent.get_consent_state

    def counting(*args: object, **kwargs: object) -> consent.ConsentState:
        reads.append("read")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(consent, "get_consent_state", counting)
    with httpx.Client(base_url=live_server, timeout=10) as browser:
        page = open_consent(browser, Authorization(register_client(browser)["client_id"]).url())
        async with httpx.AsyncClient(base_url=live_server, timeout=30, cookies=browser.cookies) as poller:
            with anyio.fail_after(10):
                status = await poller.get(page.status_url, params={"wait": 2})
    assert status.json()["status"] == "pending"
    assert len(reads) == 2  # once before waiting, once after: nothing in between
