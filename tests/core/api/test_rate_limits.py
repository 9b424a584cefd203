"""Send-class rate limits: layers, headers, Retry-After, and that a 4xx never burns quota."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from app.assembly import create_app
from core.adapters.limits.base import LimitCheck, WindowKind
from core.api import COMPAT_ENDPOINTS, endpoints
from core.api.ntfy import TOPIC_PATH
from core.bootstrap import build_core
from core.clock import ManualClock
from core.domain.secrets import digest
from core.runtime.core import Core
from core.settings import Settings
from tests.helpers import create_token, error_code, register_phone

LIMITS = {
    "limit_token_burst": 3,
    "limit_token_monthly": 5,
    "limit_receiver_daily": 1000,
    "limit_ip_minute": 1000,
    "limit_ip_hour": 10_000,
}


def send_hi(client: TestClient, headers: dict[str, str]) -> Any:
    return client.post("/v1/send", content=b"hi", headers=headers)


def make_client(
    settings: Settings, clock: ManualClock, **overrides: Any
) -> Iterator[tuple[TestClient, Core]]:
    core = build_core(settings.model_copy(update={**LIMITS, **overrides}), clock=clock)
    with TestClient(create_app(core=core)) as client:
        yield client, core
    core.engine.dispose()


@pytest.fixture
def limited(settings: Settings, clock: ManualClock) -> Iterator[tuple[TestClient, Core]]:
    yield from make_client(settings, clock)


def token_for(client: TestClient) -> dict[str, str]:
    phone = register_phone(client)
    return {"Authorization": f"Bearer {create_token(client, phone)['token']}"}


def test_every_success_carries_the_binding_layer(limited: tuple[TestClient, Core]) -> None:
    client, _ = limited
    headers = token_for(client)
    response = send_hi(client, headers)
    assert response.headers["x-ratelimit-resource"] == "token_burst"
    assert (response.headers["x-ratelimit-limit"], response.headers["x-ratelimit-remaining"]) == ("3", "2")
    assert int(response.headers["x-ratelimit-reset"]) > 0


def test_the_burst_limit_answers_429_with_retry_after(
    limited: tuple[TestClient, Core], clock: ManualClock
) -> None:
    client, _ = limited
    headers = token_for(client)
    for _ in range(3):
        assert send_hi(client, headers).status_code == 200
        clock.advance(10)
    refused = send_hi(client, headers)
    assert refused.status_code == 429 and error_code(refused) == "rate_limit_exceeded"
    assert refused.headers["x-ratelimit-resource"] == "token_burst"
    assert refused.headers["x-ratelimit-remaining"] == "0"
    assert refused.headers["retry-after"] == "30"
    clock.advance(30)
    assert send_hi(client, headers).status_code == 200


def test_the_monthly_limit_binds_until_the_next_utc_month(
    limited: tuple[TestClient, Core], clock: ManualClock
) -> None:
    client, _ = limited
    headers = token_for(client)
    for _ in range(5):
        assert send_hi(client, headers).status_code == 200
        clock.advance(61)
    refused = send_hi(client, headers)
    assert refused.status_code == 429 and refused.headers["x-ratelimit-resource"] == "token_monthly"
    clock.advance(31 * 86_400)
    assert send_hi(client, headers).status_code == 200


def test_the_receiving_account_limit_spans_its_tokens(settings: Settings, clock: ManualClock) -> None:
    for client, _ in make_client(settings, clock, limit_receiver_daily=2):
        phone = register_phone(client)
        tokens = [create_token(client, phone)["token"] for _ in range(2)]
        for token in tokens:
            assert send_hi(client, {"Authorization": f"Bearer {token}"}).status_code == 200
        third = create_token(client, phone)["token"]
        refused = send_hi(client, {"Authorization": f"Bearer {third}"})
        assert refused.status_code == 429 and refused.headers["x-ratelimit-resource"] == "receiver_daily"


@pytest.mark.parametrize("presented", ["an unknown token", "a sender token served from the cache"])
def test_the_ip_limit_refuses_before_the_token_is_even_looked_up(
    settings: Settings, clock: ManualClock, presented: str
) -> None:
    for client, core in make_client(settings, clock, limit_ip_minute=2):
        headers = token_for(client)
        for _ in range(2):
            assert send_hi(client, headers).status_code == 200
        if presented == "an unknown token":
            refused = send_hi(client, {"Authorization": "Bearer rfk_live_" + "x" * 32})
        else:
            assert core.credentials.get(digest(headers["Authorization"].removeprefix("Bearer "))) is not None
            refused = send_hi(client, headers)
        assert refused.status_code == 429 and refused.headers["x-ratelimit-resource"] == "ip_minute"


@pytest.mark.parametrize(
    "request_kwargs",
    [
        {"json": {"message": ""}},  # 400 invalid_message
        {"json": {"message": "m", "priority": "urgent"}},  # 403 priority_capped
        {"content": b"{bad", "headers": {"content-type": "application/json"}},  # 400 invalid_json
    ],
    ids=["bad field", "over the priority cap", "bad JSON"],
)
def test_an_ip_over_its_budget_gets_429_for_a_bad_request_with_a_cached_token(
    settings: Settings, clock: ManualClock, request_kwargs: dict[str, Any]
) -> None:
    """A cached credential is not looked up, so its IP is peeked only when the request fails: the
    answer is still the IP's 429, not the request's own error (decisions.md: per-IP first)."""
    for client, core in make_client(settings, clock, limit_ip_minute=2):
        phone = register_phone(client)
        token = str(create_token(client, phone, priority_cap="default")["token"])
        headers = {"Authorization": f"Bearer {token}"}
        bad = dict(request_kwargs)
        bad_headers = {**headers, **bad.pop("headers", {})}
        assert client.post("/v1/send", headers=bad_headers, **bad).status_code in (400, 403)  # within budget
        for _ in range(2):
            assert send_hi(client, headers).status_code == 200
        assert core.credentials.get(digest(token)) is not None
        refused = client.post("/v1/send", headers=bad_headers, **bad)
        assert refused.status_code == 429 and refused.headers["x-ratelimit-resource"] == "ip_minute"
        cleared = client.delete("/v1/notifications/nope!", headers=headers)  # 400 invalid_sequence_id
        assert cleared.status_code == 429 and cleared.headers["x-ratelimit-resource"] == "ip_minute"


def test_an_ip_over_its_budget_is_the_layer_named_when_the_token_is_over_too(
    settings: Settings, clock: ManualClock
) -> None:
    """Both refuse; the token's layer frees a slot first (a minute against the IP's hour), yet the
    IP's is named, as when the IP was peeked before anything else."""
    for client, _ in make_client(settings, clock, limit_ip_hour=3):
        headers = token_for(client)  # token_burst 3: both layers are used up by the same sends
        for _ in range(3):
            assert send_hi(client, headers).status_code == 200
        refused = send_hi(client, headers)
        assert refused.status_code == 429 and refused.headers["x-ratelimit-resource"] == "ip_hour"


# A request each ip_limited route refuses with a 4xx of its own, given a valid token: its method,
# its URL and the request's other arguments.
BAD_REQUESTS: dict[tuple[str, str], Callable[[str], tuple[str, dict[str, Any]]]] = {
    ("POST", "/v1/send"): lambda token: ("/v1/send", {"json": {"message": ""}, "headers": bearer(token)}),
    ("POST", "/v1/send/{token}"): lambda token: (f"/v1/send/{token}", {"json": {"title": "no message"}}),
    ("DELETE", "/v1/notifications/{sequence_id}"): lambda token: (
        "/v1/notifications/nope!",
        {"headers": bearer(token)},
    ),
    ("POST", "/message"): lambda token: (
        "/message",
        {"json": {"title": "no message"}, "headers": bearer(token)},
    ),
    # ntfy's routes (a priority ntfy does not have; a sequence id relaybox does not take)
    ("POST", "/"): lambda token: ("/", {"json": {"message": "no topic"}, "headers": bearer(token)}),
    ("PUT", "/"): lambda token: ("/", {"content": b"{bad", "headers": bearer(token)}),
    **{
        (method, TOPIC_PATH): lambda token: ("/t", {"content": b"m", "headers": {**bearer(token), "p": "9"}})
        for method in ("POST", "PUT")
    },
    **{
        (method, f"{TOPIC_PATH}/{{sequence_id}}"): lambda token: ("/t/nope!", {"headers": bearer(token)})
        for method in ("POST", "PUT", "DELETE")
    },
    ("PUT", f"{TOPIC_PATH}/{{sequence_id}}/clear"): lambda token: (
        "/t/nope!/clear",
        {"headers": bearer(token)},
    ),
    **{
        ("GET", f"{TOPIC_PATH}/{verb}"): lambda token: ("/t/publish?p=9", {"headers": bearer(token)})
        for verb in ("publish", "send", "trigger")
    },
    **{
        ("GET", f"{TOPIC_PATH}/{kind}"): lambda token: ("/t/json", {"headers": bearer(token)})
        for kind in ("json", "sse", "raw", "ws")
    },
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_every_ip_limited_route_answers_the_ips_429_for_a_bad_request_with_a_cached_token(
    settings: Settings, clock: ManualClock
) -> None:
    """No route can forget the owed peek: ``Endpoint.serve`` settles it for every ip_limited one."""
    limited = {(e.method, e.path) for e in [*endpoints(settings), *COMPAT_ENDPOINTS] if e.ip_limited}
    assert limited == set(BAD_REQUESTS)
    for client, core in make_client(settings, clock, limit_ip_minute=2):
        token = str(create_token(client, register_phone(client))["token"])
        for method, path in sorted(limited):
            url, kwargs = BAD_REQUESTS[(method, path)](token)
            answer = client.request(method, url, **kwargs)
            assert 400 <= answer.status_code < 500 and answer.status_code != 429, (path, answer.text)
        for _ in range(2):
            assert send_hi(client, bearer(token)).status_code == 200
        assert core.credentials.get(digest(token)) is not None
        for method, path in sorted(limited):
            url, kwargs = BAD_REQUESTS[(method, path)](token)
            refused = client.request(method, url, **kwargs)
            assert refused.status_code == 429, (path, refused.text)
            assert refused.headers["x-ratelimit-resource"] == "ip_minute"


def test_a_thousand_invalid_requests_leave_the_monthly_counter_untouched(
    limited: tuple[TestClient, Core], clock: ManualClock
) -> None:
    client, core = limited
    phone = register_phone(client)
    created = create_token(client, phone, priority_cap="default")
    headers = {"Authorization": f"Bearer {created['token']}"}
    bad_bodies: list[dict[str, Any]] = [
        {"json": {"message": ""}},
        {"json": {"message": "m", "priority": "urgent"}},
        {"json": {"message": "m" * 1500, "title": "t" * 100, "url": "https://x.example/" + "p" * 480}},
        {"content": b"{bad", "headers": {"content-type": "application/json"}},
        {"json": {"message": "m", "url": "nope"}},
    ]
    for n in range(1000):
        kwargs = bad_bodies[n % len(bad_bodies)]
        response = client.post(
            "/v1/send",
            headers={**headers, **kwargs.get("headers", {})},
            **{k: v for k, v in kwargs.items() if k != "headers"},
        )
        assert 400 <= response.status_code < 500 and response.status_code != 429
    monthly = LimitCheck("token_monthly", str(created["id"]), 5, kind=WindowKind.CALENDAR_MONTH)
    assert core.limiter.peek([monthly], clock.now()).binding.remaining == 5
    assert client.post("/v1/send", content=b"finally", headers=headers).status_code == 200
