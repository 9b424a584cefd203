"""The public send API: ``POST /v1/send`` and its capability-URL alias ``POST /v1/send/{token}``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.api.forms import read_fields
from core.api.routing import Call, Endpoint
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
    "invalid_device",
    "no_matching_device",
    "priority_capped",
    "insufficient_scope",
    "payload_too_large",
    "no_phone_device",
    "rate_limit_exceeded",
)


class ActionIn(BaseModel):
    label: str = Field(min_length=1, max_length=32)
    url: str = Field(max_length=512)


class SendRequest(BaseModel):
    """The send fields (documentation; ``core.domain.notification`` applies the byte limits)."""

    model_config = ConfigDict(extra="allow")
    message: str = Field(min_length=1, description="1-1500 bytes of UTF-8")
    title: str | None = Field(default=None, description="1-100 bytes")
    priority: Literal["min", "low", "default", "high", "urgent"] = "default"
    tags: list[str] | str | None = Field(default=None, description="up to 5; a list or a comma list")
    url: str | None = Field(default=None, description="http or https, at most 512 bytes")
    url_title: str | None = None
    actions: list[ActionIn] | None = Field(default=None, max_length=3)
    device: str | None = Field(default=None, description="all (default), phone, desktop, names, ids")
    markdown: bool | None = None
    ttl: int | None = Field(default=None, description="seconds kept for devices not connected; 0-259200")


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
    "desktop, names, ids, comma lists), markdown, ttl (seconds, 0-259200)."
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
