"""The public send API: ``POST /v1/send`` and its capability-URL alias ``POST /v1/send/{token}``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from core.api.forms import read_fields
from core.api.routing import Call, Endpoint
from core.domain import urgent
from core.domain.notification import DEVICE_SELECTOR_SCHEMA, URL_SCHEMA
from core.services.auth import Accept
from core.services.send import SendOut, send_notification

SEND_ERRORS = (
    "invalid_message",
    "message_too_long",
    "invalid_title",
    "invalid_priority",
    "invalid_url",
    "invalid_url_title",
    "invalid_action",
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
)


class ActionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str = Field(min_length=1, max_length=8, description="1-32 bytes of UTF-8: 8 characters always fit")
    url: str = Field(json_schema_extra=URL_SCHEMA)


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
    actions: Annotated[list[ActionIn], Field(max_length=3)] | SkipJsonSchema[None] = None
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


async def send(call: Call) -> BaseModel:
    fields = await read_fields(call.request, call.core.settings.max_body_bytes)
    if call.request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        fields = bare_form_message(fields)
    return await call.core.run(send_notification, call.principal, fields=fields, ip=call.ip)


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


SEND_DESCRIPTION = (
    "Body: JSON, form-encoded, or plain text (no Content-Type or text/plain: the whole body is the "
    "message). Fields: message (1-1500 bytes), title (1-100 bytes), priority (min|low|default|high|"
    "urgent), tags (up to 5), url, url_title, actions [{label, url}] (up to 3), device (all, phone, "
    "desktop, names, ids, comma lists), markdown, ttl (seconds, 0-259200). Urgent until acknowledged: "
    'with priority "urgent", repeat (seconds, 30-3600) makes the phone alert again that often until a '
    "device acknowledges it, the sender cancels it, or expire (seconds, 60-10800, default 3600) "
    "passes; the answer's receipt is polled at GET /v1/receipts/{id} and cancelled at POST "
    "/v1/receipts/{id}/cancel."
)

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
    ),
]
