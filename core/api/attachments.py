"""``GET /v1/attachments/{attachment_id}``: a device pulls the ciphertext of a notification's
attachment (``secretbox-v1``), whose key, name and type came inside its notification envelope."""

from __future__ import annotations

from starlette.responses import Response

from core.api.routing import Call, Endpoint
from core.services.attachments import pull_attachment
from core.services.auth import Accept


async def get_attachment(call: Call) -> Response:
    blob = await call.core.run(pull_attachment, call.principal, attachment_id=call.path["attachment_id"])
    return Response(
        blob,
        media_type="application/octet-stream",
        headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"},
    )


ENDPOINTS = [
    Endpoint(
        "GET",
        "/v1/attachments/{attachment_id}",
        get_attachment,
        "A device pulls a notification's attachment (ciphertext)",
        auth=Accept.DEVICE,
        errors=("not_found",),
        tag="devices",
        description=(
            "The attachment as `secretbox-v1` ciphertext: a 24-byte nonce, then NaCl secretbox. The key,"
            " name, MIME type and size are in the `attachment` field of the notification that named it."
            " Any device of the account may pull it until the notification expires."
        ),
        extra={
            "content_type": "application/octet-stream",
            "content_schema": {"type": "string", "contentMediaType": "application/octet-stream"},
        },
    ),
]
