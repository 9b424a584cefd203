"""Scopes: what a connector client can be granted, what the consent page says about each, and how
a requested scope string is read.

A request naming no scope asks for every connector scope (the person can untick some). An unknown
scope is refused (``invalid_scope``). ``offline_access`` is tolerated and ignored: refresh tokens
are issued without it, and it is not advertised.
"""

from __future__ import annotations

from collections.abc import Iterable

from core.principal import (
    CONNECTOR_SCOPES,
    SCOPE_APPROVALS_WRITE,
    SCOPE_DEVICES_READ,
    SCOPE_FILES_SEND,
    SCOPE_NOTIFICATIONS_SEND,
    SCOPE_PHONE_CONTROL,
    SCOPE_REMINDERS_WRITE,
)

TOLERATED = frozenset({"offline_access"})

DESCRIPTIONS = {
    SCOPE_NOTIFICATIONS_SEND: "Send notifications to your phone",
    SCOPE_DEVICES_READ: "See your devices, their battery and when they were last reachable",
    SCOPE_REMINDERS_WRITE: "Set reminders that your phone fires, and cancel them",
    SCOPE_APPROVALS_WRITE: "Ask you questions with answer buttons and read your answers",
    SCOPE_PHONE_CONTROL: "Ring your phone at full volume, even when it is on silent",
    SCOPE_FILES_SEND: "Put text files into your phone's Downloads folder",
}


def requested(scope: str | None) -> list[str]:
    """The scope values of a request, tolerated ones dropped, duplicates removed."""
    values = (scope or "").split()
    return list(dict.fromkeys(value for value in values if value not in TOLERATED))


def unknown(scope: str | None) -> list[str]:
    return [value for value in requested(scope) if value not in CONNECTOR_SCOPES]


def canonical(scopes: Iterable[str]) -> str:
    """Scopes as one space-separated string in the order of ``CONNECTOR_SCOPES``."""
    wanted = set(scopes)
    return " ".join(scope for scope in CONNECTOR_SCOPES if scope in wanted)


def allowed_scope(scope: str | None) -> str | None:
    """The most a request can be granted: its connector scopes (every one when it names none);
    ``None`` when it names an unknown scope."""
    if unknown(scope):
        return None
    values = requested(scope)
    return canonical(values or CONNECTOR_SCOPES)
