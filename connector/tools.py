"""The eight connector tools. Each is a thin call of the core operation its REST twin uses, with the
connector grant as principal; a core error becomes an ``isError`` result whose text starts with
the stable code. Docstrings are the descriptions the model reads."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, ParamSpec

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from connector import outputs
from core.context import Core
from core.errors import RelayError
from core.principal import (
    SCOPE_APPROVALS_WRITE,
    SCOPE_DEVICES_READ,
    SCOPE_FILES_SEND,
    SCOPE_NOTIFICATIONS_SEND,
    SCOPE_PHONE_CONTROL,
    SCOPE_REMINDERS_WRITE,
    Principal,
)
from core.services import device_list, documents, interactions, reminders, ring, send

log = logging.getLogger("relaybox.connector")
P = ParamSpec("P")
PrincipalSource = Callable[[], Principal]

# The scope each tool needs; the auth gate answers 403 with it before the call reaches the tool.
TOOL_SCOPES: dict[str, str] = {
    "send_notification": SCOPE_NOTIFICATIONS_SEND,
    "list_devices": SCOPE_DEVICES_READ,
    "remind_me": SCOPE_REMINDERS_WRITE,
    "cancel_reminder": SCOPE_REMINDERS_WRITE,
    "request_approval": SCOPE_APPROVALS_WRITE,
    "check_reply": SCOPE_APPROVALS_WRITE,
    "find_my_phone": SCOPE_PHONE_CONTROL,
    "send_file": SCOPE_FILES_SEND,
}
MAX_PROBLEMS = 5  # argument problems named in one invalid_arguments error
APPROVAL_WAIT_MAX_S = 45
PROGRESS_STEP_S = 5


def core_tool(fn: Callable[P, Awaitable[BaseModel]]) -> Callable[P, Awaitable[CallToolResult]]:
    """Run a tool body; render its model as structured content, a core error as ``code: message``,
    and anything unexpected as ``internal_error`` (logged, never shown)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            result = await fn(*args, **kwargs)
        except RelayError as error:
            return tool_error(error.code, error.message)
        except ValidationError as error:
            return tool_error("invalid_arguments", describe(error))
        except Exception:
            log.exception("connector tool %s failed unexpectedly", fn.__name__)
            return tool_error("internal_error", "Something went wrong on our side.")
        structured = result.model_dump(mode="json")
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(structured))], structured_content=structured
        )

    return wrapper


def tool_error(code: str, message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=f"{code}: {message}")], is_error=True)


def describe(error: ValidationError) -> str:
    """Which arguments and why, in a line: ``at: Field required; choices.1: String should have at most
    48 characters``. The rejected values are the caller's data and are not repeated."""
    problems = [
        f"{'.'.join(str(part) for part in item['loc']) or 'arguments'}: {item['msg']}"
        for item in error.errors(include_url=False, include_input=False)[:MAX_PROBLEMS]
    ]
    return "; ".join(problems)


def register_tools(mcp: MCPServer, core: Core, principal: PrincipalSource) -> None:
    """Add the eight tools to ``mcp``; ``principal`` yields the verified connector grant of the call."""

    def ip() -> str:
        # Per-IP layers key on the grant: every assistant platform calls from a few shared addresses.
        return f"grant:{principal().grant_id}"

    @mcp.tool(
        title="Send a notification", annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False)
    )
    @core_tool
    async def send_notification(
        message: Annotated[str, Field(description="The text; at most 1500 bytes")],
        title: Annotated[str | None, Field(description="Short title; at most 100 bytes")] = None,
        priority: Annotated[str | None, Field(description="min, low, default, high or urgent")] = None,
        tags: Annotated[list[str] | None, Field(description="Up to 5 short tags")] = None,
        url: Annotated[str | None, Field(description="An http(s) link to open")] = None,
        device: Annotated[
            str | None, Field(description="all (default), phone, desktop, or device names")
        ] = None,
        ttl: Annotated[
            int | None, Field(description="Seconds to keep it for devices that are offline")
        ] = None,
    ) -> outputs.NotificationSent:
        """Push a notification to the user's phone (and their other devices).

        Use it only when the user asked to be notified or a long task they are waiting on finished;
        not for ordinary replies in the conversation. The text is encrypted to each device; the
        result lists the devices it went to and any fields that were trimmed. When ``device``
        names no device at all, nothing is sent and the call fails with ``no_matching_device``.
        """
        fields = {
            "message": message,
            "title": title,
            "priority": priority,
            "tags": tags,
            "url": url,
            "device": device,
            "ttl": ttl,
        }
        sent = await core.run(send.send_notification, principal(), fields=fields, ip=ip())
        return outputs.NotificationSent(
            id=sent.id,
            delivered_to=[outputs.Delivered(device_id=d.device_id, type=d.type) for d in sent.delivered_to],
            warnings=sent.warnings,
        )

    @mcp.tool(title="List devices", annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    @core_tool
    async def list_devices() -> outputs.DeviceListing:
        """List the user's paired devices (phone first), whether each can be reached now, and the
        phone's battery and charging state when it reported them."""
        listing = await core.run(device_list.list_devices, principal())
        return outputs.DeviceListing.model_validate(listing, from_attributes=True)

    @mcp.tool(title="Remind me", annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False))
    @core_tool
    async def remind_me(
        message: Annotated[
            str, Field(min_length=1, max_length=500, description="What to remind the user of")
        ],
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
        out = await core.run(reminders.create_reminder, principal(), body=body, ip=ip())
        return outputs.ReminderSet(
            reminder_id=out.reminder_id, fire_at=out.fire_at, warnings=out.warnings or []
        )

    @mcp.tool(
        title="Cancel a reminder", annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True)
    )
    @core_tool
    async def cancel_reminder(
        reminder_id: Annotated[str, Field(description="The rmd_… id remind_me returned")],
    ) -> outputs.CancelRequested:
        """Ask the phone to cancel a reminder. Always answers cancel_requested for a well-formed id:
        the server cannot read the reminders it queued, so it cannot confirm one existed. If
        ``warnings`` is not empty, the phone may not get the cancel in time: tell the user."""
        out = await core.run(reminders.cancel_reminder, principal(), reminder_id=reminder_id, ip=ip())
        return outputs.CancelRequested(warnings=out.warnings or [])

    @mcp.tool(
        title="Ask for approval", annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True)
    )
    @core_tool
    async def request_approval(
        question: Annotated[str, Field(min_length=1, max_length=1000, description="Shown on the phone")],
        ctx: Context,
        choices: Annotated[
            list[str] | None, Field(description="2-4 button labels (max 48 chars each)")
        ] = None,
        expires_in_seconds: Annotated[int, Field(ge=60, le=86_400)] = 600,
        idempotency_key: Annotated[str | None, Field(description="Reuse to avoid a second prompt")] = None,
        wait_seconds: Annotated[int, Field(ge=0, le=APPROVAL_WAIT_MAX_S, description="Wait for the tap")] = 0,
    ) -> outputs.ApprovalRequested:
        """Ask the user a question on their phone with 2-4 buttons (default Approve / Deny).

        Returns at once with a request_id (call check_reply with it), or, with wait_seconds, waits
        for the answer up to that long while reporting progress. Asking the same thing again while
        it is open returns the same request (created = false) and does not prompt twice.
        """
        body = interactions.InteractionCreate(
            question=question,
            choices=choices or ["Approve", "Deny"],
            expires_in_seconds=expires_in_seconds,
            idempotency_key=idempotency_key,
        )
        out = await core.run(interactions.create_interaction, principal(), body=body, ip=ip())
        waited = 0
        while out.status == "pending" and waited < wait_seconds:
            step = min(PROGRESS_STEP_S, wait_seconds - waited)
            await ctx.report_progress(waited, total=wait_seconds, message="waiting for the tap on the phone")
            polled = await core.run(
                interactions.poll_interaction, principal(), interaction_id=out.id, wait=step
            )
            out = polled.model_copy(update={"created": out.created})
            waited += step
        return outputs.ApprovalRequested(
            request_id=out.id,
            status=out.status,
            created=out.created,
            expires_at=out.expires_at,
            choice_index=out.choice_index,
            answered_at=out.answered_at,
        )

    @mcp.tool(title="Check the reply", annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    @core_tool
    async def check_reply(
        request_id: Annotated[str, Field(description="The request_id request_approval returned")],
        wait_seconds: Annotated[int, Field(ge=0, le=45, description="Hold up to this long for the tap")] = 20,
    ) -> outputs.Reply:
        """Get the answer to a request_approval question. Returns the moment the phone answers;
        while status is pending, call it again. choice_index is an index into your own choices
        (the server never stored them)."""
        out = await core.run(
            interactions.poll_interaction, principal(), interaction_id=request_id, wait=wait_seconds
        )
        return outputs.Reply(
            status=out.status,
            expires_at=out.expires_at,
            choice_index=out.choice_index,
            answered_at=out.answered_at,
        )

    @mcp.tool(title="Find my phone", annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True))
    @core_tool
    async def find_my_phone() -> outputs.RingRequested:
        """Ring the user's phone at full volume for up to 60 seconds, even when it is on silent.
        Fire-and-forget: delivery is never confirmed; warnings say what is uncertain."""
        out = await core.run(ring.find_my_phone, principal(), ip=ip())
        return outputs.RingRequested(warnings=out.warnings or [])

    @mcp.tool(title="Send a file", annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False))
    @core_tool
    async def send_file(
        filename: Annotated[str, Field(description="e.g. notes.md; plain-text and code extensions only")],
        content: Annotated[str, Field(description="UTF-8 text, at most 131072 bytes")],
    ) -> outputs.FileSent:
        """Put a text file into the phone's Downloads folder. Text only. The content passes through
        the server in memory and is encrypted to the phone's key before it is parked (up to an hour)
        for the phone to fetch."""
        body = documents.DocumentCreate(filename=filename, content=content)
        out = await core.run(documents.send_document, principal(), body=body, ip=ip())
        return outputs.FileSent(document_id=out.document_id, byte_length=out.byte_length)
