"""The public send API: ``POST /v1/send``, its capability-URL alias ``POST /v1/send/{token}``, and
``DELETE /v1/notifications/{sequence_id}``, which takes a sent notification away again."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict
from pydantic.json_schema import SkipJsonSchema

from core.api.forms import read_fields
from core.api.ntfy_params import ntfy_headers_on_send
from core.api.routing import Call, Endpoint
from core.domain import urgent
from core.domain.actions import ACTION_BODY_MAX_BYTES
from core.domain.delivery_time import asks_for_later
from core.domain.notification import (
    DEVICE_SELECTOR_SCHEMA,
    ICON_SCHEMA,
    SEQUENCE_ID_MAX_CHARS,
    SEQUENCE_ID_PATTERN,
    TIMESTAMP_MAX,
    URL_SCHEMA,
)
from core.services.auth import Accept
from core.services.notification_clear import ClearOut, clear_notification
from core.services.send import SendOut, send_notification

SEND_ERRORS = (
    "invalid_message",
    "message_too_long",
    "invalid_title",
    "invalid_priority",
    "invalid_url",
    "invalid_url_title",
    "invalid_action",
    "invalid_icon",
    "invalid_sequence_id",
    "invalid_tags",
    "invalid_markdown",
    "invalid_ttl",
    "repeat_requires_urgent",
    "invalid_repeat",
    "invalid_expire",
    "invalid_device",
    "no_matching_device",
    "priority_capped",
    "insufficient_scope",
    "payload_too_large",
    "no_phone_device",
    "rate_limit_exceeded",
    "too_many_urgent",
    "phone_app_outdated",
    "invalid_timestamp",
    "invalid_delay",
    "delay_unsupported",
    "too_many_scheduled",
)


LABEL = Field(min_length=1, max_length=8, description="1-32 bytes of UTF-8: 8 characters always fit")
SEQUENCE_ID_SCHEMA: JsonDict = {"pattern": SEQUENCE_ID_PATTERN, "maxLength": SEQUENCE_ID_MAX_CHARS}


class ViewActionIn(BaseModel):
    """A button that opens ``url`` (the default kind: ``action`` may be left out)."""

    model_config = ConfigDict(extra="forbid")
    action: Literal["view"] | SkipJsonSchema[None] = None
    label: str = LABEL
    url: str = Field(json_schema_extra=URL_SCHEMA)


class HttpActionIn(BaseModel):
    """A button that sends a request to ``url`` when tapped (on the phone, never before)."""

    model_config = ConfigDict(extra="forbid")
    action: Literal["http"]
    label: str = LABEL
    url: str = Field(json_schema_extra=URL_SCHEMA)
    method: Literal["POST", "PUT"] | SkipJsonSchema[None] = Field(default=None, description="default POST")
    body: str | SkipJsonSchema[None] = Field(
        default=None,
        max_length=ACTION_BODY_MAX_BYTES // 4,
        description=f"text, at most {ACTION_BODY_MAX_BYTES} bytes of UTF-8",
    )


class HttpGetActionIn(BaseModel):
    """A GET request to ``url`` when tapped; it carries no body."""

    model_config = ConfigDict(extra="forbid")
    action: Literal["http"]
    label: str = LABEL
    url: str = Field(json_schema_extra=URL_SCHEMA)
    method: Literal["GET"]


RepeatSeconds = Annotated[int, Field(ge=urgent.REPEAT_MIN_S, le=urgent.REPEAT_MAX_S)]
ExpireSeconds = Annotated[int, Field(ge=urgent.EXPIRE_MIN_S, le=urgent.EXPIRE_MAX_S)]


class SendRequest(BaseModel):
    """The send fields (documentation; ``core.domain.notification`` applies the byte limits).
    Optional fields are documented without null: a form cannot carry one (null in JSON is absent)."""

    model_config = ConfigDict(extra="allow")
    message: str = Field(min_length=1, description="1-1500 bytes of UTF-8")
    title: str | SkipJsonSchema[None] = Field(
        default=None, min_length=1, max_length=25, description="1-100 bytes of UTF-8 (25 characters fit)"
    )
    priority: Literal["min", "low", "default", "high", "urgent"] = "default"
    tags: list[str] | str | SkipJsonSchema[None] = Field(
        default=None, description="up to 5; a list or a comma list"
    )
    url: str | SkipJsonSchema[None] = Field(
        default=None, description="http or https, at most 512 bytes", json_schema_extra=URL_SCHEMA
    )
    url_title: str | SkipJsonSchema[None] = Field(
        default=None, min_length=1, max_length=25, description="1-100 bytes of UTF-8"
    )
    actions: (
        Annotated[list[ViewActionIn | HttpActionIn | HttpGetActionIn], Field(max_length=3)]
        | SkipJsonSchema[None]
    ) = None
    icon: str | SkipJsonSchema[None] = Field(
        default=None,
        description="an https URL of an image the phone may show beside it, at most 512 bytes",
        json_schema_extra=ICON_SCHEMA,
    )
    sequence_id: str | SkipJsonSchema[None] = Field(
        default=None,
        description="a key of your choice (or an earlier send's id): a send with the same one "
        "replaces that notification on the phone instead of adding one",
        json_schema_extra=SEQUENCE_ID_SCHEMA,
    )
    device: str | SkipJsonSchema[None] = Field(
        default=None,
        description="all (default), phone, desktop, names, ids",
        json_schema_extra=DEVICE_SELECTOR_SCHEMA,
    )
    markdown: bool | SkipJsonSchema[None] = None
    ttl: int | SkipJsonSchema[None] = Field(
        default=None, description="seconds kept for devices not connected; clamped to 0-259200"
    )
    repeat: RepeatSeconds | SkipJsonSchema[None] = Field(
        default=None,
        description='with priority "urgent" only: alert again every this many seconds until '
        "acknowledged; the answer then carries a receipt",
    )
    expire: ExpireSeconds | SkipJsonSchema[None] = Field(
        default=None,
        description=f"with repeat: stop repeating after this long, default {urgent.EXPIRE_DEFAULT_S}",
    )
    timestamp: Annotated[int, Field(ge=1, le=TIMESTAMP_MAX)] | SkipJsonSchema[None] = Field(
        default=None, description="Unix seconds the notification says it was sent (default: now)"
    )
    delay: str | int | SkipJsonSchema[None] = Field(
        default=None,
        description="deliver later: seconds, a duration (30m, 2h, 1d) or a Unix time, 10 s to 3 days "
        "ahead; the answer is 202 with scheduled and deliver_at, and DELETE "
        "/v1/notifications/{sequence_id} cancels it before then",
    )
    at: str | int | SkipJsonSchema[None] = Field(
        default=None, description="deliver at: a Unix time or an ISO 8601 time with its zone; as delay"
    )


async def send(call: Call) -> BaseModel:
    fields = await read_fields(call.request, call.core.settings.max_body_bytes)
    if call.request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        fields = bare_form_message(fields)
    delay, warnings = ntfy_headers_on_send(call.request.headers)
    if delay is not None and not asks_for_later(fields):
        fields = {**fields, "delay": delay}
    sent: SendOut = await call.core.run(send_notification, call.principal, fields=fields, ip=call.ip)
    if sent.scheduled:
        call.status = 202
    if warnings:
        sent.warnings = [*warnings, *sent.warnings]
    return sent


def bare_form_message(fields: dict[str, Any]) -> dict[str, Any]:
    """``curl -d 'disk almost full' URL`` sends the text form-encoded as one key with no value:
    take it as the message, as a person typing that command means."""
    if "message" not in fields and len(fields) == 1:
        [(key, value)] = fields.items()
        if value == "" and isinstance(key, str):
            return {"message": key}
    return fields


async def send_with_path_token(call: Call) -> BaseModel:
    return await send(call)


async def clear(call: Call) -> BaseModel:
    return await call.core.run(
        clear_notification,
        call.principal,
        sequence_id=call.path["sequence_id"],
        device=call.request.query_params.get("device"),
        ip=call.ip,
    )


SEND_DESCRIPTION = (
    "Body: JSON, form-encoded, or plain text (no Content-Type or text/plain: the whole body is the "
    "message). Fields: message (1-1500 bytes), title (1-100 bytes), priority (min|low|default|high|"
    "urgent), tags (up to 5; emoji short codes such as warning or white_check_mark show as their "
    "emoji), url, url_title, icon (https), actions (up to 3: {label, url} opens the URL, {action: "
    "http, label, url, method?, body?} sends a request when tapped), device (all, phone, desktop, "
    "names, ids, comma lists), markdown, ttl (seconds, 0-259200), sequence_id (1-64 of "
    "A-Z a-z 0-9 . _ ~ -: a later send with the same one replaces this notification). The answer's "
    "sequence_id is the one given, else the id: reuse it to update the notification, or clear it "
    "with DELETE /v1/notifications/{sequence_id}. Urgent until "
    'acknowledged: with priority "urgent", repeat (seconds, 30-3600) makes the phone alert again that '
    "often until a device acknowledges it, the sender cancels it, or expire (seconds, 60-10800, default "
    "3600) passes; the answer's receipt is polled at GET /v1/receipts/{id} and cancelled at POST "
    "/v1/receipts/{id}/cancel. A field the send does not know is named in warnings (and ignored); "
    "so are ntfy's headers, but for its Delay, At and In, read as delay. delay or at (10 s to 3 days "
    "ahead, else 400 invalid_delay) keeps the notification, sealed to each device now, until then: the "
    "answer is 202 with scheduled: true and deliver_at (Unix seconds); DELETE "
    "/v1/notifications/{sequence_id} (the answer's sequence_id) cancels it before then. An account "
    "keeps at most 100 waiting by default (409 too_many_scheduled); an urgent send with repeat is never "
    "scheduled (400 delay_unsupported)."
)
SCHEDULED = {"also": {202: "Scheduled (delay or at): the body is the same, with scheduled and deliver_at"}}
CLEAR_ERRORS = (
    "invalid_sequence_id",
    "invalid_device",
    "no_matching_device",
    "no_phone_device",
    "phone_app_outdated",
    "insufficient_scope",
    "rate_limit_exceeded",
)
DEVICE_QUERY = {
    "name": "device",
    "in": "query",
    "required": False,
    "description": "all (default), phone, desktop, names, ids: as a send's device",
    "schema": {"type": "string", **DEVICE_SELECTOR_SCHEMA},
}

ENDPOINTS = [
    Endpoint(
        "POST",
        "/v1/send",
        send,
        "Send a notification to your devices",
        auth=Accept.SENDER_TOKEN,
        response=SendOut,
        errors=SEND_ERRORS,
        tag="send",
        ip_limited=True,
        description=SEND_DESCRIPTION,
        body_doc=SendRequest,
        extra=SCHEDULED,
    ),
    Endpoint(
        "POST",
        "/v1/send/{token}",
        send_with_path_token,
        "Send a notification, token in the path (for clients that cannot set headers)",
        auth=Accept.SENDER_TOKEN,
        auth_path_param="token",
        response=SendOut,
        errors=SEND_ERRORS,
        tag="send",
        ip_limited=True,
        description=SEND_DESCRIPTION + " The URL is redacted in every log line.",
        body_doc=SendRequest,
        extra=SCHEDULED,
    ),
    Endpoint(
        "DELETE",
        "/v1/notifications/{sequence_id}",
        clear,
        "Take a notification away from your devices (by its sequence_id, or its id)",
        auth=Accept.SENDER_TOKEN,
        response=ClearOut,
        errors=CLEAR_ERRORS,
        tag="send",
        ip_limited=True,
        description="The selected devices are told to remove the notification of this sequence: "
        "the last one sent with this sequence_id, or the one whose id it is. Sent like a send (queued "
        "for a device that is offline) and charged to the same limits. The server keeps no record of "
        "what it sent, so an unknown sequence is no error: the devices ignore it. The caller's scheduled "
        "sends of this sequence still waiting for their time are cancelled (listed in cancelled).",
        extra={"query": [DEVICE_QUERY], "path": {"sequence_id": SEQUENCE_ID_SCHEMA}},
    ),
]
