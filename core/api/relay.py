"""Relay routes: post an envelope for a paired device; follow the device's queue as SSE."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing

from pydantic import BaseModel

from core.api.routing import Call, Endpoint
from core.api.sse import EventStream
from core.errors import RelayError
from core.services import relay
from core.services.auth import Accept
from core.services.stream import KEEPALIVE, LivePush, follow_queue

EVENT_NAMES = {"push": "push", "token_update": "token_update"}
MAX_SEQ = 2**63 - 1  # a signed 64-bit integer in both databases


async def post_envelope(call: Call) -> BaseModel:
    return await call.core.run(relay.relay_envelope, call.principal, body=call.body_as(relay.EnvelopeCreate))


async def sync(call: Call) -> EventStream:
    after = replay_point(call.request.query_params.get("since_id"), call.request.headers.get("last-event-id"))
    call.principal.require_device()
    return EventStream(sse_frames(follow_queue(call.core, call.principal, after=after)))


def replay_point(since_id: str | None, last_event_id: str | None) -> int:
    """``since_id`` wins over ``Last-Event-ID``; neither means everything still queued."""
    raw = since_id if since_id is not None else last_event_id
    if raw is None:
        return 0
    # ASCII digits only ("²".isdigit() holds, int("²") fails), and within the seq column's bigint.
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19 or int(raw) > MAX_SEQ:
        raise RelayError("invalid_since_id")
    return int(raw)


async def sse_frames(
    items: AsyncGenerator[relay.QueueItem | LivePush | str, None],
) -> AsyncGenerator[str, None]:
    yield ": relaybox stream\n\n"
    try:
        async with aclosing(items):  # closed with the frames, even when they stop at a yield
            async for item in items:
                yield _frame(item)
    except RelayError as error:
        if error.code != "unavailable":
            raise
        # The database or Redis went away mid-stream (already logged): end the response cleanly;
        # the device reconnects with Last-Event-ID and resumes once it is back.


def _frame(item: relay.QueueItem | LivePush | str) -> str:
    if isinstance(item, LivePush):
        return f"event: push\ndata: {json.dumps(item.data, separators=(',', ':'))}\n\n"
    if item == KEEPALIVE or not isinstance(item, relay.QueueItem):
        return ": keep-alive\n\n"
    event = EVENT_NAMES.get(item.type, "envelope")
    if item.type == "push":
        data = json.dumps({"seq": item.seq, **json.loads(item.blob)}, separators=(",", ":"))
    else:
        data = item.model_dump_json(by_alias=True)
    return f"id: {item.seq}\nevent: {event}\ndata: {data}\n\n"


SINCE_ID = {
    "name": "since_id",
    "in": "query",
    "required": False,
    "schema": {"type": "integer", "minimum": 0, "maximum": MAX_SEQ},
}
# For text/event-stream the schema describes one event, as parsed from its fields (OpenAPI 3.2 names
# this `itemSchema`; a 3.1 document has only `schema`). Comment lines are no events.
SYNC_EVENT = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"enum": sorted({*EVENT_NAMES.values(), "envelope"})},
        "data": {"type": "string", "contentMediaType": "application/json"},
        "id": {"type": "string", "pattern": "^[0-9]+$", "description": "The queue seq (none on a live push)"},
    },
}

ENDPOINTS = [
    Endpoint(
        "POST",
        "/v1/envelopes",
        post_envelope,
        "Relay an encrypted envelope to a paired device",
        auth=Accept.DEVICE,
        body=relay.EnvelopeCreate,
        response=relay.EnvelopeAccepted,
        status=202,
        errors=(
            "invalid_blob",
            "invalid_envelope_type",
            "envelope_too_large",
            "feature_disabled",
            "not_found",
        ),
        tag="relay",
    ),
    Endpoint(
        "GET",
        "/v1/sync",
        sync,
        "The device's event stream (server-sent events; replay with since_id)",
        auth=Accept.DEVICE,
        errors=("invalid_since_id",),
        tag="relay",
        description=(
            "Frames: `id: <seq>`, `event: envelope|push|token_update`, `data: <json>`; a comment line "
            "every 15 s keeps the connection alive. Replay from `since_id` or the `Last-Event-ID` header."
        ),
        extra={"query": [SINCE_ID], "content_type": "text/event-stream", "content_schema": SYNC_EVENT},
    ),
]
