"""The connector tools, declared: each a module-level function and a ``Tool`` record of its name,
the scope it needs, the function, its output and how it presents itself; ``TOOLS`` lists them in the
order clients see (the urgent receipts' two last, from ``connector.receipt_tools``). A function is a
thin call of the core operation its REST twin uses (``list_devices``: of the summaries that operation
wraps), with the connector grant as principal; its docstring is the description the model reads, and its
parameters after ``call`` are the tool's arguments (``connector.tools`` registers them). The
notification tools live in ``connector.notification_tools``; ``connector.tool_base`` has the records."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from connector import outputs
from connector.notification_tools import clear_notification, send_notification
from connector.receipt_tools import RECEIPT_TOOLS
from connector.tool_base import CHANGES, READS, REPEATABLE, Tool, ToolCall
from core.principal import (
    SCOPE_APPROVALS_WRITE,
    SCOPE_DEVICES_READ,
    SCOPE_FILES_SEND,
    SCOPE_NOTIFICATIONS_SEND,
    SCOPE_PHONE_CONTROL,
    SCOPE_REMINDERS_WRITE,
)
from core.services import device_list, documents, interactions, reminders, ring, typed_replies

__all__ = ["TOOLS", "Tool", "ToolCall"]

PROGRESS_STEP_S = 5  # request_approval reports progress between waits of at most this long


async def list_devices(call: ToolCall) -> outputs.DeviceListing:
    """List the user's paired devices (phone first), whether each can be reached now, and the
    phone's battery and charging state when it reported them."""
    summaries = await call.core.run(device_list.device_summaries, call.principal)
    return outputs.device_listing(summaries)


async def remind_me(
    call: ToolCall,
    message: Annotated[str, Field(min_length=1, max_length=500, description="What to remind the user of")],
    at: Annotated[
        int | str,
        Field(
            description="When, 60 s to 365 days from now: Unix epoch seconds, or an ISO 8601 "
            "date-time with the user's UTC offset, e.g. 2026-12-24T18:00:00+01:00"
        ),
    ],
) -> outputs.ReminderSet:
    """Set a reminder that the phone fires by itself at ``at``.

    The server keeps only the encrypted setup, queued until the phone has it. If ``warnings``
    is not empty, delivery is uncertain (the phone is offline, say): tell the user. Keep the
    returned reminder_id if the user may want to cancel it.
    """
    body = reminders.ReminderCreate(message=message, at=at)
    out = await call.core.run(reminders.create_reminder, call.principal, body=body, ip=call.ip)
    return outputs.ReminderSet(reminder_id=out.reminder_id, fire_at=out.fire_at, warnings=out.warnings or [])


async def cancel_reminder(
    call: ToolCall,
    reminder_id: Annotated[str, Field(description="The rmd_… id remind_me returned")],
) -> outputs.CancelRequested:
    """Ask the phone to cancel a reminder. Always answers cancel_requested for a well-formed id:
    the server cannot read the reminders it queued, so it cannot confirm one existed. If
    ``warnings`` is not empty, the phone may not get the cancel in time: tell the user."""
    out = await call.core.run(reminders.cancel_reminder, call.principal, reminder_id=reminder_id, ip=call.ip)
    return outputs.CancelRequested(warnings=out.warnings or [])


async def request_approval(
    call: ToolCall,
    question: Annotated[str, Field(min_length=1, max_length=1000, description="Shown on the phone")],
    ctx: Context,
    choices: Annotated[
        list[str] | None,
        Field(
            description="2-4 button labels (max 48 chars each); [] with allow_text for a typed reply alone"
        ),
    ] = None,
    allow_text: Annotated[
        bool, Field(description="Let the user also type a reply, e.g. the reason for a denial")
    ] = False,
    text_max_chars: Annotated[
        int | None,
        Field(
            ge=1,
            le=typed_replies.TEXT_MAX_CHARS,
            description=f"With allow_text: most characters (default {typed_replies.TEXT_DEFAULT_MAX_CHARS})",
        ),
    ] = None,
    expires_in_seconds: Annotated[int, Field(ge=60, le=86_400)] = 600,
    idempotency_key: Annotated[str | None, Field(description="Reuse to avoid a second prompt")] = None,
    wait_seconds: Annotated[int, Field(ge=0, le=interactions.WAIT_MAX_S, description="Wait for the tap")] = 0,
    callback_url: Annotated[
        str | None,
        Field(description="Only an https URL of the user's own system that must hear the answer"),
    ] = None,
) -> outputs.ApprovalRequested:
    """Ask the user a question on their phone with 2-4 buttons (default Approve / Deny), and
    optionally let them type a reply.

    Set allow_text when words may matter: the reason for a denial, a correction ("yes, but on
    staging"), a value only they know. With allow_text and choices [] the typed reply is the
    whole answer: use it for an open question, and buttons when the answer is one of a few
    options. The typed reply comes back as text once, in the first result that reports the
    answer (this call's wait or check_reply), and the server then deletes it: keep it yourself.

    Returns at once with a request_id (call check_reply with it), or, with wait_seconds, waits
    for the answer up to that long while reporting progress. Asking the same thing again while
    it is open returns the same request (created = false) and does not prompt twice.

    Set callback_url only when the user asks for their own system (a CI job, a webhook receiver
    they name) to be told of the answer: the server POSTs it there when they answer or the
    question expires, signed with the returned callback_secret, which that system needs to
    verify it. Otherwise leave it out, and wait with wait_seconds or check_reply.
    """
    asked: dict[str, Any] = {"choices": choices} if choices or (allow_text and choices == []) else {}
    if text_max_chars is not None:
        asked["text_max_chars"] = text_max_chars
    body = interactions.InteractionCreate(
        question=question,
        allow_text=allow_text,
        expires_in_seconds=expires_in_seconds,
        idempotency_key=idempotency_key,
        callback_url=callback_url,
        **asked,
    )
    out = await call.core.run(interactions.create_interaction, call.principal, body=body, ip=call.ip)
    callback_secret = out.callback_secret
    # The core's long poll waits, in steps short enough to report progress between them.
    waited = 0
    while out.status == "pending" and waited < wait_seconds:
        step = min(PROGRESS_STEP_S, wait_seconds - waited)
        await ctx.report_progress(waited, total=wait_seconds, message="waiting for the answer on the phone")
        polled = await call.core.run(
            interactions.poll_interaction, call.principal, interaction_id=out.id, wait=step
        )
        out = polled.model_copy(update={"created": out.created})
        waited += step
    return outputs.ApprovalRequested(
        request_id=out.id, created=out.created, callback_secret=callback_secret, **outputs.reply_fields(out)
    )


async def check_reply(
    call: ToolCall,
    request_id: Annotated[str, Field(description="The request_id request_approval returned")],
    wait_seconds: Annotated[
        int, Field(ge=0, le=interactions.WAIT_MAX_S, description="Hold up to this long for the tap")
    ] = interactions.WAIT_DEFAULT_S,
) -> outputs.Reply:
    """Get the answer to a request_approval question. Returns the moment the phone answers;
    while status is pending, call it again. choice_index is an index into your own choices
    (the server never stored them). A typed reply is in text the first time the answer is
    reported and never again (text_already_read says it was): keep it."""
    out = await call.core.run(
        interactions.poll_interaction, call.principal, interaction_id=request_id, wait=wait_seconds
    )
    return outputs.Reply(**outputs.reply_fields(out))


async def find_my_phone(call: ToolCall) -> outputs.RingRequested:
    """Ring the user's phone at full volume for up to 60 seconds, even when it is on silent.
    Fire-and-forget: delivery is never confirmed; warnings say what is uncertain."""
    out = await call.core.run(ring.find_my_phone, call.principal, ip=call.ip)
    return outputs.RingRequested(warnings=out.warnings or [])


async def send_file(
    call: ToolCall,
    filename: Annotated[str, Field(description="e.g. notes.md; plain-text and code extensions only")],
    content: Annotated[str, Field(description="UTF-8 text, at most 131072 bytes")],
) -> outputs.FileSent:
    """Put a text file into the phone's Downloads folder. Text only. The content passes through
    the server in memory and is encrypted to the phone's key before it is parked (up to an hour)
    for the phone to fetch."""
    body = documents.DocumentCreate(filename=filename, content=content)
    out = await call.core.run(documents.send_document, call.principal, body=body, ip=call.ip)
    return outputs.FileSent(document_id=out.document_id, byte_length=out.byte_length, warnings=out.warnings)


TOOLS = [
    Tool(
        "send_notification",
        SCOPE_NOTIFICATIONS_SEND,
        send_notification,
        outputs.NotificationSent,
        "Send a notification",
        CHANGES,
    ),
    Tool(
        "clear_notification",
        SCOPE_NOTIFICATIONS_SEND,
        clear_notification,
        outputs.NotificationCleared,
        "Clear a notification",
        REPEATABLE,
    ),
    Tool("list_devices", SCOPE_DEVICES_READ, list_devices, outputs.DeviceListing, "List devices", READS),
    Tool("remind_me", SCOPE_REMINDERS_WRITE, remind_me, outputs.ReminderSet, "Remind me", CHANGES),
    Tool(
        "cancel_reminder",
        SCOPE_REMINDERS_WRITE,
        cancel_reminder,
        outputs.CancelRequested,
        "Cancel a reminder",
        REPEATABLE,
    ),
    Tool(
        "request_approval",
        SCOPE_APPROVALS_WRITE,
        request_approval,
        outputs.ApprovalRequested,
        "Ask for approval",
        REPEATABLE,
    ),
    Tool("check_reply", SCOPE_APPROVALS_WRITE, check_reply, outputs.Reply, "Check the reply", READS),
    Tool(
        "find_my_phone",
        SCOPE_PHONE_CONTROL,
        find_my_phone,
        outputs.RingRequested,
        "Find my phone",
        REPEATABLE,
    ),
    Tool("send_file", SCOPE_FILES_SEND, send_file, outputs.FileSent, "Send a file", CHANGES),
    *RECEIPT_TOOLS,
]
