"""The key a browser subscribes to web push with (``applicationServerKey``), for the web app."""

from __future__ import annotations

from pydantic import BaseModel, Field

from core.api.routing import Call, Endpoint
from core.errors import RelayError


class WebPushKey(BaseModel):
    application_server_key: str = Field(description="The VAPID public key: base64url, uncompressed P-256")


async def web_push_key(call: Call) -> BaseModel:
    key = call.core.push.web_push_key
    if key is None:
        raise RelayError("not_found", "Web push is not enabled on this server.")
    return WebPushKey(application_server_key=key)


ENDPOINTS = [
    Endpoint(
        "GET",
        "/v1/push/web-key",
        web_push_key,
        "The VAPID public key browsers subscribe to web push with",
        auth=None,
        response=WebPushKey,
        errors=("not_found",),
        tag="devices",
    ),
]
