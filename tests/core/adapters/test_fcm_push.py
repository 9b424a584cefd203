"""FcmPush against a fake FCM over real HTTP: the real firebase-admin code runs end to end."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import firebase_admin
import pytest
from firebase_admin import _retry, messaging

from core.adapters.push.base import PUSH_DATA_LIMIT, PushMessage, PushOutcome, PushTarget
from core.adapters.push.fcm import FcmPush
from tests.fakes.fcm_server import (
    FAKE_ACCESS_TOKEN,
    INTERNAL,
    INVALID_PAYLOAD,
    INVALID_REGISTRATION_TOKEN,
    QUOTA_EXCEEDED,
    SENDER_ID_MISMATCH,
    THIRD_PARTY_AUTH_ERROR,
    UNAVAILABLE,
    UNREGISTERED,
    FakeFcm,
    FcmErrorReply,
    make_service_account,
)

pytestmark = pytest.mark.anyio

TIMEOUT_S = 3.0  # a token refresh and a send on a loaded machine; no test here waits it out
TOKEN = "registration-token-1"
MESSAGE = PushMessage("approval_request", {"request_id": "r-42", "title": "Deploy?"}, high_priority=True)


@pytest.fixture
async def push(fcm: FakeFcm) -> AsyncIterator[FcmPush]:
    sender = FcmPush(make_service_account(fcm.origin), fcm_url=fcm.origin, timeout_s=TIMEOUT_S)
    yield sender
    await sender.aclose()


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK retries 500/503 four times with 0.5 s exponential backoff (7 s in all).
    monkeypatch.setattr(_retry.HttpxRetry, "get_backoff_time", lambda _: 0.0)


async def send(push: FcmPush, target: PushTarget, message: PushMessage = MESSAGE) -> PushOutcome:
    with anyio.fail_after(5):
        return await push.send(target, message)


def test_firebase_admin_still_has_the_private_hooks_fcm_push_uses() -> None:
    assert firebase_admin.__version__ == "7.7.0"
    assert messaging._MessagingService.FCM_URL.endswith("/v1/projects/{0}/messages:send")
    assert callable(messaging._get_messaging_service)
    app = firebase_admin.initialize_app(
        firebase_admin.credentials.Certificate(make_service_account("http://127.0.0.1:9")),
        name="guard-private-hooks",
    )
    try:
        service = messaging._get_messaging_service(app)
        assert service._fcm_url.startswith("https://fcm.googleapis.com/")
        assert callable(service._async_client.aclose)
    finally:
        firebase_admin.delete_app(app)


async def test_a_data_message_arrives_with_its_type_and_cleartext_fields_as_strings(
    fcm: FakeFcm, push: FcmPush
) -> None:
    assert await send(push, PushTarget("d1", fcm_token=TOKEN), MESSAGE) is PushOutcome.SENT

    [request] = fcm.received
    assert request.project == "relaybox-test"
    assert request.authorization == f"Bearer {FAKE_ACCESS_TOKEN}"
    assert request.message["data"] == {"type": "approval_request", "request_id": "r-42", "title": "Deploy?"}
    assert all(isinstance(value, str) for value in request.message["data"].values())
    assert "notification" not in request.message
    assert "validate_only" not in request.body


@pytest.mark.parametrize(("high_priority", "priority"), [(True, "high"), (False, "normal")])
async def test_android_priority_follows_the_message_priority(
    fcm: FakeFcm, push: FcmPush, high_priority: bool, priority: str
) -> None:
    message = PushMessage("sync", high_priority=high_priority)

    assert await send(push, PushTarget("d1", fcm_token=TOKEN), message) is PushOutcome.SENT

    assert fcm.received[0].message["android"]["priority"] == priority


async def test_the_ttl_is_sent_in_seconds(fcm: FakeFcm, push: FcmPush) -> None:
    await send(push, PushTarget("d1", fcm_token=TOKEN), PushMessage("sync", ttl_s=120))

    assert fcm.received[0].message["android"]["ttl"] == "120s"


@pytest.mark.parametrize(("kind", "other_kind"), [("token", "fid"), ("fid", "token")])
async def test_the_registration_is_targeted_by_its_kind(
    fcm: FakeFcm, push: FcmPush, kind: str, other_kind: str
) -> None:
    target = PushTarget("d1", fcm_token="registration-1", fcm_token_kind=kind)

    assert await send(push, target) is PushOutcome.SENT

    message = fcm.received[0].message
    assert message[kind] == "registration-1"
    assert other_kind not in message


async def test_an_unknown_registration_kind_is_a_failure_and_nothing_is_sent(
    fcm: FakeFcm, push: FcmPush
) -> None:
    target = PushTarget("d1", fcm_token=TOKEN, fcm_token_kind="apns")

    assert await send(push, target) is PushOutcome.FAILED
    assert fcm.received == []


async def test_a_device_without_an_fcm_registration_has_no_route(fcm: FakeFcm, push: FcmPush) -> None:
    assert await send(push, PushTarget("d1")) is PushOutcome.NO_ROUTE
    assert fcm.received == []
    assert fcm.token_requests == 0


async def test_a_message_over_the_data_limit_is_not_sent(fcm: FakeFcm, push: FcmPush) -> None:
    message = PushMessage("notify", {"body": "x" * PUSH_DATA_LIMIT})

    assert await send(push, PushTarget("d1", fcm_token=TOKEN), message) is PushOutcome.FAILED
    assert fcm.received == []


async def test_a_message_exactly_at_the_data_limit_is_sent(fcm: FakeFcm, push: FcmPush) -> None:
    padding = PUSH_DATA_LIMIT - PushMessage("notify", {"body": ""}).encoded_size()
    message = PushMessage("notify", {"body": "x" * padding})
    assert message.encoded_size() == PUSH_DATA_LIMIT

    assert await send(push, PushTarget("d1", fcm_token=TOKEN), message) is PushOutcome.SENT
    assert len(fcm.received) == 1


@pytest.mark.parametrize(
    "error",
    [UNREGISTERED, SENDER_ID_MISMATCH, INVALID_REGISTRATION_TOKEN],
    ids=["unregistered", "sender-id-mismatch", "invalid-registration-token"],
)
async def test_a_registration_the_far_end_disowns_is_reported_unregistered(
    fcm: FakeFcm, push: FcmPush, error: FcmErrorReply
) -> None:
    fcm.fail(TOKEN, error)

    assert await send(push, PushTarget("d1", fcm_token=TOKEN)) is PushOutcome.UNREGISTERED
    assert len(fcm.received) == 1


@pytest.mark.parametrize("error", [INVALID_PAYLOAD, QUOTA_EXCEEDED], ids=["invalid-payload", "quota"])
async def test_other_client_errors_are_failures_sent_once(
    fcm: FakeFcm, push: FcmPush, error: FcmErrorReply
) -> None:
    fcm.fail(TOKEN, error)

    assert await send(push, PushTarget("d1", fcm_token=TOKEN)) is PushOutcome.FAILED
    assert len(fcm.received) == 1


@pytest.mark.usefixtures("no_backoff")
@pytest.mark.parametrize("error", [INTERNAL, UNAVAILABLE], ids=["500", "503"])
async def test_a_server_error_is_a_failure_after_the_sdk_retries(
    fcm: FakeFcm, push: FcmPush, error: FcmErrorReply
) -> None:
    fcm.fail(TOKEN, error)

    assert await send(push, PushTarget("d1", fcm_token=TOKEN)) is PushOutcome.FAILED
    assert len(fcm.received) == 5  # the first attempt and four retries


async def test_an_authentication_error_is_a_failure_after_the_sdk_refreshes_its_token_twice(
    fcm: FakeFcm, push: FcmPush
) -> None:
    fcm.fail(TOKEN, THIRD_PARTY_AUTH_ERROR)

    assert await send(push, PushTarget("d1", fcm_token=TOKEN)) is PushOutcome.FAILED
    # On a 401 the SDK's auth flow refreshes the token (synchronously, on the event loop) and resends.
    assert (len(fcm.received), fcm.token_requests) == (3, 3)


async def test_a_reply_that_never_comes_times_out_as_a_failure(fcm: FakeFcm, push: FcmPush) -> None:
    fcm.stall(TOKEN)

    assert await send(push, PushTarget("d1", fcm_token=TOKEN)) is PushOutcome.FAILED
    assert await send(push, PushTarget("d2", fcm_token="another-token")) is PushOutcome.SENT


async def test_a_token_endpoint_that_never_answers_times_out_as_a_failure(
    fcm: FakeFcm, push: FcmPush
) -> None:
    fcm.stall_token_endpoint()

    assert await send(push, PushTarget("d1", fcm_token=TOKEN)) is PushOutcome.FAILED
    assert fcm.received == []


async def test_the_token_refresh_leaves_the_event_loop_free(fcm: FakeFcm) -> None:
    fcm.stall_token_endpoint()
    sender = FcmPush(make_service_account(fcm.origin), fcm_url=fcm.origin, timeout_s=30)
    outcomes: list[PushOutcome] = []

    async def send_one() -> None:
        outcomes.append(await sender.send(PushTarget("d1", fcm_token=TOKEN), MESSAGE))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(send_one)
            assert await anyio.to_thread.run_sync(fcm.token_requested.wait, 5)
            # This line runs while the refresh waits only if the refresh left the event loop free.
            fcm.release_token_endpoint()
        await sender.aclose()

    assert outcomes == [PushOutcome.SENT]


async def test_the_access_token_is_fetched_once_and_reused(fcm: FakeFcm, push: FcmPush) -> None:
    for device in ("d1", "d2", "d3"):
        assert await send(push, PushTarget(device, fcm_token=TOKEN)) is PushOutcome.SENT

    assert fcm.token_requests == 1


async def test_logs_never_name_the_registration_or_the_payload(
    fcm: FakeFcm, push: FcmPush, caplog: pytest.LogCaptureFixture
) -> None:
    secret_token, secret_field = "secret-registration-token", "secret-field-value"
    message = PushMessage("notify", {"title": secret_field})
    caplog.set_level(logging.DEBUG, logger="core.adapters.push.fcm")

    fcm.fail(secret_token, UNREGISTERED)
    await send(push, PushTarget("d1", fcm_token=secret_token), message)
    fcm.fail(secret_token, INVALID_PAYLOAD)
    await send(push, PushTarget("d1", fcm_token=secret_token), message)
    await send(push, PushTarget("d1", fcm_token=secret_token), PushMessage("notify", {"x": "y" * 5000}))

    assert caplog.records
    assert secret_token not in caplog.text
    assert secret_field not in caplog.text


async def test_a_service_account_file_path_is_accepted(fcm: FakeFcm, tmp_path: Path) -> None:
    path = tmp_path / "service-account.json"
    path.write_text(json.dumps(make_service_account(fcm.origin)))
    sender = FcmPush(path, fcm_url=fcm.origin, timeout_s=TIMEOUT_S)
    try:
        assert await send(sender, PushTarget("d1", fcm_token=TOKEN)) is PushOutcome.SENT
    finally:
        await sender.aclose()


@pytest.mark.parametrize(
    "path",
    ["", "/", "/v1/projects/{0}/messages:send", "/v1/projects/relaybox-test/messages:send"],
    ids=["origin", "origin-slash", "template", "full-url"],
)
async def test_the_fcm_url_may_be_an_origin_or_the_full_send_url(fcm: FakeFcm, path: str) -> None:
    sender = FcmPush(make_service_account(fcm.origin), fcm_url=fcm.origin + path, timeout_s=TIMEOUT_S)
    try:
        assert await send(sender, PushTarget("d1", fcm_token=TOKEN)) is PushOutcome.SENT
    finally:
        await sender.aclose()

    assert fcm.received[0].project == "relaybox-test"


async def test_the_sender_owns_a_named_app_and_never_the_default_one(fcm: FakeFcm) -> None:
    sender = FcmPush(make_service_account(fcm.origin), app_name="relaybox-named", fcm_url=fcm.origin)
    assert firebase_admin.get_app("relaybox-named").name == "relaybox-named"
    await send(sender, PushTarget("d1", fcm_token=TOKEN))
    with pytest.raises(ValueError, match="default Firebase app does not exist"):
        firebase_admin.get_app()

    await sender.aclose()

    with pytest.raises(ValueError, match="does not exist"):
        firebase_admin.get_app("relaybox-named")


async def test_aclose_works_for_a_sender_that_never_sent_and_twice(fcm: FakeFcm) -> None:
    sender = FcmPush(make_service_account(fcm.origin), fcm_url=fcm.origin)

    with anyio.fail_after(5):
        await sender.aclose()
        await sender.aclose()


async def test_a_closed_sender_fails_instead_of_raising(fcm: FakeFcm) -> None:
    sender = FcmPush(make_service_account(fcm.origin), fcm_url=fcm.origin)
    await sender.aclose()

    assert await send(sender, PushTarget("d1", fcm_token=TOKEN)) is PushOutcome.FAILED
    assert fcm.received == []
