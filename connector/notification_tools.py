"""The notification tools: ``send_notification`` (with the content a person expects: a title, tags
shown as emoji, Markdown, a link, an icon, up to three buttons, and a sequence_id that lets one
notification progress in place) and ``clear_notification``, which takes it away again. Both call the
operations ``POST /v1/send`` and ``DELETE /v1/notifications/{sequence_id}`` call, so every field is
checked by the same code (``core.domain.notification``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from connector import outputs
from connector.tool_base import ToolCall
from core.services import notification_clear, send

SEQUENCE_ID = (
    "1-64 characters of A-Z a-z 0-9 . _ ~ -, e.g. deploy-42. Reuse it to update one notification in "
    "place (progress of a long task) instead of sending another; clear_notification takes it away."
)


class ActionArg(BaseModel):
    """A button under the notification (the server checks every limit, as for POST /v1/send)."""

    action: Literal["view", "http"] = Field(
        default="view", description="view opens url; http sends a request to url when the user taps it"
    )
    label: str = Field(description="The button's text, at most 32 bytes")
    url: str = Field(description="An http(s) URL")
    method: Literal["POST", "PUT", "GET"] | None = Field(default=None, description="http only; default POST")
    body: str | None = Field(default=None, description="http only, not with GET: text, at most 512 bytes")


async def send_notification(
    call: ToolCall,
    message: Annotated[str, Field(description="The text; at most 1500 bytes")],
    title: Annotated[str | None, Field(description="Short title; at most 100 bytes")] = None,
    priority: Annotated[str | None, Field(description="min, low, default, high or urgent")] = None,
    tags: Annotated[
        list[str] | None,
        Field(
            description="Up to 5 short tags; emoji short codes (warning, white_check_mark, "
            "rotating_light, tada, x, hourglass, rocket, …) show as their emoji before the title"
        ),
    ] = None,
    markdown: Annotated[
        bool, Field(description="Render message as Markdown (lists, bold, links) where the phone can")
    ] = False,
    url: Annotated[
        str | None, Field(description="An http(s) link opened when the notification is tapped")
    ] = None,
    url_title: Annotated[str | None, Field(description="The link's text; at most 100 bytes")] = None,
    icon: Annotated[str | None, Field(description="An https URL of an image to show beside it")] = None,
    actions: Annotated[
        list[ActionArg] | None, Field(description="Up to 3 buttons for a one-tap follow-up")
    ] = None,
    sequence_id: Annotated[str | None, Field(description=SEQUENCE_ID)] = None,
    device: Annotated[str | None, Field(description="all (default), phone, desktop, or device names")] = None,
    ttl: Annotated[int | None, Field(description="Seconds to keep it for devices that are offline")] = None,
    repeat: Annotated[
        int | None, Field(description="Priority urgent only: alert again every this many seconds (30-3600)")
    ] = None,
    expire: Annotated[
        int | None, Field(description="With repeat: stop after this many seconds (60-10800, default 3600)")
    ] = None,
) -> outputs.NotificationSent:
    """Push a notification to the user's phone (and their other devices).

    Use it only when the user asked to be notified or a long task they are waiting on finished;
    not for ordinary replies in the conversation.

    For a long task, send its progress as one notification that changes: pass the same
    sequence_id each time ("build 1/3", then "2/3", …) and the phone replaces the notification
    instead of stacking up many. Without one, the result's sequence_id (the notification's id)
    does the same. Call clear_notification with it when the notification no longer matters.

    Set markdown for formatted text. Tags that are emoji short codes (warning, white_check_mark,
    rotating_light, tada) show as emoji. actions add up to 3 buttons for a one-tap follow-up: view
    opens a URL; http sends a request (POST by default) to a URL the user's own systems serve, only
    when tapped (for example a webhook that retries the job).

    priority urgent with repeat makes the phone alert again and again until the user
    acknowledges it (or expire passes): use it only when the user asked to be woken or alerted
    until they respond, e.g. a production incident they are on call for, never for routine
    updates. The result's receipt then goes to check_receipt (did they acknowledge, on which
    device?) and cancel_receipt (stop the alarm once it no longer matters).

    The text is encrypted to each device; the result lists the devices it went to and any fields
    that were trimmed. When ``device`` names no device at all, nothing is sent and the call fails
    with ``no_matching_device``.
    """
    fields = {
        "message": message,
        "title": title,
        "priority": priority,
        "tags": tags,
        "markdown": markdown,
        "url": url,
        "url_title": url_title,
        "icon": icon,
        "actions": [action.model_dump(exclude_none=True) for action in actions] if actions else None,
        "sequence_id": sequence_id,
        "device": device,
        "ttl": ttl,
        "repeat": repeat,
        "expire": expire,
    }
    sent = await call.core.run(send.send_notification, call.principal, fields=fields, ip=call.ip)
    return outputs.NotificationSent(
        id=sent.id,
        sequence_id=sent.sequence_id,
        delivered_to=outputs.delivered(sent.delivered_to),
        warnings=sent.warnings,
        receipt=sent.receipt,
    )


async def clear_notification(
    call: ToolCall,
    sequence_id: Annotated[
        str, Field(description="The sequence_id send_notification returned (or the one you gave it)")
    ],
    device: Annotated[str | None, Field(description="all (default), phone, desktop, or device names")] = None,
) -> outputs.NotificationCleared:
    """Remove a notification you sent from the user's phone (and other devices).

    Use it when the notification no longer matters: the long task it tracked is finished and the
    user has been told in the conversation, or the alert resolved itself. Pass the sequence_id
    that send_notification returned. Clearing a notification that is already gone does no harm.
    To say that a task finished, send_notification with the same sequence_id instead: that
    replaces the progress with the result.
    """
    out = await call.core.run(
        notification_clear.clear_notification,
        call.principal,
        sequence_id=sequence_id,
        device=device,
        ip=call.ip,
    )
    return outputs.NotificationCleared(
        sequence_id=out.sequence_id, delivered_to=outputs.delivered(out.delivered_to), warnings=out.warnings
    )
