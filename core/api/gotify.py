"""Gotify's message API, so that every tool that speaks Gotify reaches a relaybox account's devices,
end to end encrypted: ``POST /message`` with the token as an application token (``X-Gotify-Key``,
``Authorization: Bearer``, or ``?token=``), a JSON, form or multipart body (and the query, as
Gotify's form binding reads it), answered and refused in Gotify's shapes. ``docs/compat-gotify.md``
lists every field.

The sender token stands for Gotify's application: a message without a title takes the token's
label, as Gotify gives it the application's name. Priorities 0-10 become relaybox's five levels
(``PRIORITY_BANDS``); no priority is relaybox's default, as there is no application default here.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from core.api.forms import read_fields
from core.api.routing import Call, Endpoint
from core.errors import RelayError
from core.services.auth import Accept
from core.services.limits import limit_headers
from core.services.send import SendOut, send_notification

# (highest Gotify priority of the band, relaybox's level): 0 is Gotify's "no notification" minimum,
# 1-3 its quiet band, 4-7 its default band, 8-9 its high band, 10 its most important.
PRIORITY_BANDS = ((0, "min"), (3, "low"), (7, "default"), (9, "high"), (10, "urgent"))
FIELDS = ("message", "title", "priority", "extras")
MARKDOWN = "text/markdown"
IMAGE_LABEL = "Image"
# Gotify's extras namespaces relaybox reads; any other key is named in the answer's warnings.
READ_EXTRAS = ("client::display", "client::notification")


def gotify_token(request: Request) -> str:
    """The token where Gotify looks for an application token, in its order: ``?token=``,
    ``X-Gotify-Key``, ``Authorization: Bearer``."""
    for candidate in (request.query_params.get("token"), request.headers.get("x-gotify-key")):
        if candidate and candidate.strip():
            return candidate.strip()
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    raise RelayError("missing_token", "Send the token as Gotify clients do: X-Gotify-Key, Bearer or ?token=.")


def gotify_error(error: RelayError) -> Response:
    """Gotify's error shape; relaybox's code and details under ``relaybox``."""
    relaybox: dict[str, Any] = {"code": error.code}
    if error.details:
        relaybox["details"] = error.details
    body = {
        "error": HTTPStatus(error.status).phrase,
        "errorCode": error.status,
        "errorDescription": error.message or error.code,
        "relaybox": relaybox,
    }
    return JSONResponse(body, status_code=error.status, headers=error.headers)


async def create_message(call: Call) -> Response:
    given: dict[str, Any] = {
        key: call.request.query_params[key] for key in FIELDS if key in call.request.query_params
    }
    body = await read_fields(call.request, call.core.settings.max_body_bytes, multipart=True)
    given.update({key: value for key, value in body.items() if key in FIELDS})
    fields, warnings = message_fields(given, call.principal.label)
    sent: SendOut = await call.core.run(send_notification, call.principal, fields=fields, ip=call.ip)
    answer = {
        "id": int(sent.id.removeprefix("msg_")[:13], 16),  # Gotify's ids are numbers (52 bits fit JSON)
        "appid": _app_id(call.principal.token_id or call.principal.account_id),
        "message": fields["message"],
        "title": fields.get("title", ""),
        "priority": given.get("priority", _GOTIFY_DEFAULT),
        "date": datetime.fromtimestamp(call.core.clock.now(), UTC).isoformat().replace("+00:00", "Z"),
    }
    if isinstance(given.get("extras"), dict):
        answer["extras"] = given["extras"]
    answer["relaybox"] = {
        "id": sent.id,
        "delivered_to": [device.model_dump() for device in sent.delivered_to],
        "warnings": [*warnings, *sent.warnings],
    }
    return JSONResponse(answer, headers=limit_headers(sent.rate_limit) if sent.rate_limit else None)


def message_fields(given: dict[str, Any], label: str | None) -> tuple[dict[str, Any], list[str]]:
    """A send's fields from Gotify's, and warnings for the extras relaybox does not read."""
    message = given.get("message")
    if not isinstance(message, str) or not message:
        raise RelayError("invalid_message", "Field 'message' is required.")
    fields: dict[str, Any] = {"message": message, "priority": gotify_priority(given.get("priority"))}
    title = given.get("title")
    if isinstance(title, str) and title.strip():
        fields["title"] = title
    elif label:
        fields["title"] = label
    extras = given.get("extras")
    if extras is None:
        return fields, []
    if not isinstance(extras, dict):
        raise RelayError("invalid_body", "extras is an object of namespaced keys.")
    display, notification = _namespace(extras, "client::display"), _namespace(extras, "client::notification")
    if display.get("contentType") == MARKDOWN:
        fields["markdown"] = True
    click = notification.get("click")
    if isinstance(click, dict) and click.get("url"):
        fields["url"] = click["url"]
    if image := notification.get("bigImageUrl"):  # never fetched: a button opens it
        fields["actions"] = [{"action": "view", "label": IMAGE_LABEL, "url": image}]
    others = sorted(key for key in extras if key not in READ_EXTRAS)
    return fields, [f"extras not read here: {', '.join(others)}"] if others else []


def gotify_priority(value: Any) -> str:
    """Gotify's number (JSON, or a form's text) as one of relaybox's five levels."""
    if value is None or value == "":
        return "default"
    number = value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(value, float) and value.is_integer():
        number = int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdecimal() and len(value.strip()) <= 6:
        number = int(value.strip())
    if number is None:
        raise RelayError("invalid_priority", "Field 'priority' is a number, 0-10.")
    return next((level for top, level in PRIORITY_BANDS if number <= top), "urgent")


def _namespace(extras: dict[str, Any], name: str) -> dict[str, Any]:
    value = extras.get(name, {})
    if not isinstance(value, dict):
        raise RelayError("invalid_body", f"extras {name} is an object.")
    return value


def _app_id(key: str) -> int:
    """A stable number for the token, as Gotify answers its application's id."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)


_GOTIFY_DEFAULT = 5  # the answer's priority when none was sent: the middle of relaybox's default band

ENDPOINTS = [
    Endpoint(
        "POST",
        "/message",
        create_message,
        "Gotify: create a message",
        auth=Accept.SENDER_TOKEN,
        tag="gotify",
        ip_limited=True,
        auth_token=gotify_token,
        error_shape=gotify_error,
    ),
]
