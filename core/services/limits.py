"""Send-class rate limits: per IP, per token (burst and calendar month), per receiving account.

The order that keeps 4xx requests from burning quota: the IP layers are *peeked* before the token
is looked up; every layer is *charged* together, all-or-nothing, only after the body, the priority
cap and the envelope size have passed. Every 2xx and 429 of a limited route carries the binding
layer in ``X-RateLimit-*`` headers.

A credential the verified-credential cache holds is not looked up, so its request's peek is owed
instead (``owe_ip_peek``): the charge covers the IP layers too, so a request that is charged needs
no peek, and one that fails before its charge settles the peek then (``settle_ip_peek``): an IP
over its budget still gets the 429 whatever else was wrong, as when the peek came first, and a
send under load makes one call to the limiter instead of two (with Redis: one round trip and one
worker-thread hop fewer).
"""

from __future__ import annotations

import functools
import ipaddress
from contextvars import ContextVar

import anyio
from pydantic import BaseModel, Field

from core.adapters.limits.base import LimitCheck, LimitDecision, LimitState, RateLimiter, WindowKind
from core.availability import DOWN_AS_UNAVAILABLE
from core.errors import RelayError
from core.principal import Principal, PrincipalKind
from core.runtime.core import Core
from core.runtime.tx import Tx
from core.settings import Settings


class Limited(BaseModel):
    """A response of a limited route; ``rate_limit`` becomes headers, never body."""

    rate_limit: LimitState | None = Field(default=None, exclude=True)
    monthly: LimitState | None = Field(default=None, exclude=True)


def address_key(settings: Settings, ip: str) -> str:
    """What an address's limits count under: an IPv4 address itself (an IPv4-mapped IPv6 one too),
    an IPv6 address by its network of ``ipv6_limit_prefix`` bits (one subscriber holds a whole
    /64: 2^64 addresses would otherwise be 2^64 budgets)."""
    return _address_key(ip, settings.ipv6_limit_prefix)


@functools.lru_cache(maxsize=4096)
def _address_key(ip: str, ipv6_prefix: int) -> str:
    try:
        address = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return ip  # not an address (an in-process test client): itself
    if isinstance(address, ipaddress.IPv4Address):
        return str(address)
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.IPv6Network((address, ipv6_prefix), strict=False))


def ip_checks(settings: Settings, ip: str) -> list[LimitCheck]:
    key = address_key(settings, ip)
    return [
        LimitCheck("ip_minute", key, settings.limit_ip_minute, 60),
        LimitCheck("ip_hour", key, settings.limit_ip_hour, 3600),
    ]


def send_class_checks(settings: Settings, principal: Principal, ip: str) -> list[LimitCheck]:
    checks = ip_checks(settings, ip)
    caller = principal.token_id if principal.kind is PrincipalKind.SENDER_TOKEN else principal.grant_id
    if caller:
        checks += [
            LimitCheck("token_burst", caller, settings.limit_token_burst, 60),
            LimitCheck("token_monthly", caller, settings.limit_token_monthly, kind=WindowKind.CALENDAR_MONTH),
        ]
    checks.append(LimitCheck("receiver_daily", principal.account_id, settings.limit_receiver_daily, 86_400))
    return checks


def peek_ip(tx: Tx, ip: str) -> None:
    """First step of a limited route: refuse an IP that is already over its budget."""
    refuse_ip_over_budget(tx.limiter, tx.settings, ip, tx.clock.now())


async def peek_ip_outside_transaction(core: Core, ip: str) -> None:
    """``peek_ip`` for a route whose credential comes from the verified-credential cache: on the
    event loop when the limiter is in process, else on a worker thread; Redis down is 503
    ``unavailable``, as in an operation (``Core.run``)."""
    check = functools.partial(refuse_ip_over_budget, core.limiter, core.settings, ip, core.clock.now())
    if not core.limiter.blocking:
        check()
        return
    with DOWN_AS_UNAVAILABLE:
        await anyio.to_thread.run_sync(check)


# The IP whose peek the request running in this context owes (``owe_ip_peek``), else None.
_OWED_IP_PEEK: ContextVar[str | None] = ContextVar("relaybox_owed_ip_peek", default=None)


def owe_ip_peek(ip: str | None) -> None:
    """Record that this request's IP peek is owed (``None``: nothing is owed). Set in the request's
    task by authentication, so it holds for that request alone."""
    _OWED_IP_PEEK.set(ip)


async def settle_ip_peek(core: Core) -> None:
    """For a request that failed before its send-class charge: the IP peek it owes, if any, now.
    Raises the IP's 429 when it is over its budget (so the caller answers that instead of its own
    error, as a peek made first would have); otherwise returns and the request's error stands.

    Only for errors raised before the charge: once charged, the request counts in the IP's layers,
    and a peek would see the IP's budget used by the request itself."""
    ip = _OWED_IP_PEEK.get()
    if ip is not None:
        _OWED_IP_PEEK.set(None)
        await peek_ip_outside_transaction(core, ip)


def refuse_ip_over_budget(limiter: RateLimiter, settings: Settings, ip: str, now: float) -> None:
    decision = limiter.peek(ip_checks(settings, ip), now)
    if not decision.allowed:
        raise limit_error(decision)


def charge_send_class(tx: Tx, principal: Principal, ip: str) -> tuple[LimitState, LimitState | None]:
    """Charge every send-class layer at once; 429 ``rate_limit_exceeded`` naming the binding layer.

    Returns the binding layer (for the headers) and the monthly layer (for Pushover's X-Limit-App-*).
    """
    decision = tx.limiter.acquire(send_class_checks(tx.settings, principal, ip), tx.clock.now())
    if not decision.allowed:
        raise limit_error(decision)
    return decision.binding, decision.layer("token_monthly")


def limit_error(decision: LimitDecision) -> RelayError:
    headers = limit_headers(decision.binding)
    headers["Retry-After"] = str(decision.retry_after)
    return RelayError("rate_limit_exceeded", details={"resource": decision.binding.resource}, headers=headers)


def limit_headers(state: LimitState) -> dict[str, str]:
    return {
        "X-RateLimit-Limit": str(state.limit),
        "X-RateLimit-Remaining": str(state.remaining),
        "X-RateLimit-Reset": str(state.reset_at),
        "X-RateLimit-Resource": state.resource,
    }


def peek_send_class(tx: Tx, principal: Principal, *, ip: str) -> tuple[LimitState, LimitState | None]:
    """The send-class state without charging (headers on a refused request)."""
    checks = send_class_checks(tx.settings, principal, ip)
    decision = tx.limiter.peek(checks, tx.clock.now())
    monthly = [c for c in checks if c.resource == "token_monthly"]
    monthly_state = tx.limiter.peek(monthly, tx.clock.now()).binding if monthly else None
    return decision.binding, monthly_state
