"""Phone operations: reminders, questions with long-poll answers, ring, documents."""

from __future__ import annotations

import re

from pydantic import BaseModel
from starlette.responses import Response

from core.api.openapi import Callback
from core.api.routing import Call, Endpoint, until_disconnected
from core.domain import webhooks
from core.errors import RelayError
from core.services import (
    callback_delivery,
    documents,
    interaction_models,
    interactions,
    reminders,
    ring,
    typed_replies,
)
from core.services.auth import Accept
from core.settings import Settings

CALLERS = Accept.SENDER_TOKEN  # connector grants reach the same operations in process
DOCUMENTS_PATH = "/v1/documents"  # the public POST; while disabled, any call gets a plain 404
GATED = ("no_phone_device", "phone_app_outdated", "rate_limit_exceeded", "insufficient_scope")
CREATE_DESCRIPTION = (
    "With `allow_text: true` the phone may type a reply of at most `text_max_chars` characters "
    f"(default {typed_replies.TEXT_DEFAULT_MAX_CHARS}, at most {typed_replies.TEXT_MAX_CHARS}) "
    "beside its choice, say a reason for a denial; with `choices: []` as well, the typed reply is the "
    "whole answer. The text travels sealed to the server's key and is handed to the first read after "
    "the answer, then forgotten.\n\n"
    "With `callback_url` (https), the server POSTs the interaction there once it is answered or "
    "expires, signed with the `callback_secret` of the create response (Standard Webhooks), and "
    "retries a failure with backoff; GET shows the delivery under `callback`. For a caller that "
    "cannot hold a long poll (CI, cron, serverless); docs/protocol.md says how to verify it."
)


def _duration(seconds: int) -> str:
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


CALLBACK = Callback(
    "callback_url",
    interaction_models.CallbackEvent,
    "The question was answered or expired",
    "Sent to `callback_url` once the question is answered or expires; a failed attempt is retried "
    f"after {', '.join(_duration(s) for s in callback_delivery.RETRY_AFTER_S)} until a 2xx (410 stops "
    "it). Redirects are not followed. "
    "Verify the signature over the raw body and refuse a `webhook-timestamp` more than "
    f"{webhooks.TOLERANCE_S} s away from your clock; `webhook-id` is the same on every retry of an "
    "event, so it can tell a repeat.",
    {
        "webhook-id": "The event's id (evt_…), the same on each of its retries",
        "webhook-timestamp": "This attempt's time, Unix epoch seconds",
        "webhook-signature": "v1, and the standard base64 of HMAC-SHA256(key, "
        "'{webhook-id}.{webhook-timestamp}.{body}'), the key being callback_secret's base64 after whsec_",
    },
)


async def create_reminder(call: Call) -> BaseModel:
    body = call.body_as(reminders.ReminderCreate)
    return await call.core.run(reminders.create_reminder, call.principal, body=body, ip=call.ip)


async def cancel_reminder(call: Call) -> BaseModel:
    reminder_id = call.path["reminder_id"]
    return await call.core.run(reminders.cancel_reminder, call.principal, reminder_id=reminder_id, ip=call.ip)


async def create_interaction(call: Call) -> BaseModel:
    body = call.body_as(interaction_models.InteractionCreate)
    result = await call.core.run(interactions.create_interaction, call.principal, body=body, ip=call.ip)
    call.status = 201 if result.created else 200
    return result


async def get_interaction(call: Call) -> BaseModel | Response:
    wait = wait_seconds(call.request.query_params.get("wait"))
    interaction_id = call.path["interaction_id"]
    polled = await until_disconnected(
        call.request,
        call.core.run(
            interactions.poll_interaction, call.principal, interaction_id=interaction_id, wait=wait
        ),
    )
    return polled if polled is not None else Response(status_code=204)  # nobody is left to hear it


async def answer_interaction(call: Call) -> BaseModel:
    body = call.body_as(interaction_models.Answer)
    interaction_id = call.path["interaction_id"]
    return await call.core.run(
        interactions.answer_interaction, call.principal, interaction_id=interaction_id, body=body
    )


async def ring_device(call: Call) -> BaseModel:
    return await call.core.run(ring.ring_phone, call.principal, device_id=call.path["device_id"], ip=call.ip)


async def pull_document(call: Call) -> BaseModel:
    return await call.core.run(documents.pull_document, call.principal, document_id=call.path["document_id"])


def wait_seconds(raw: str | None) -> int:
    """``wait`` defaults to ``WAIT_DEFAULT_S``; whole seconds, clamped to 0-``WAIT_MAX_S`` by the
    operation."""
    if raw is None or raw == "":
        return interactions.WAIT_DEFAULT_S
    text = raw.strip()
    if not re.fullmatch(r"-?[0-9]{1,11}", text):  # not str.isdigit: int() refuses "²" and "--5"
        raise RelayError("invalid_wait")
    return int(text)


WAIT = {
    "name": "wait",
    "in": "query",
    "required": False,
    "schema": {
        "type": "integer",
        "default": interactions.WAIT_DEFAULT_S,
        "minimum": -99_999_999_999,
        "maximum": 99_999_999_999,
    },
    "description": f"seconds to wait for an answer, clamped to 0-{interactions.WAIT_MAX_S}",
}


def endpoints(settings: Settings) -> list[Endpoint]:
    listed = [
        Endpoint(
            "POST",
            "/v1/reminders",
            create_reminder,
            "Schedule a reminder the phone fires itself",
            auth=CALLERS,
            body=reminders.ReminderCreate,
            response=reminders.ReminderOut,
            status=201,
            errors=("fire_at_too_soon", "fire_at_too_far", *GATED),
            tag="phone",
        ),
        Endpoint(
            "DELETE",
            "/v1/reminders/{reminder_id}",
            cancel_reminder,
            "Forward a reminder cancel to the phone",
            auth=CALLERS,
            response=reminders.CancelOut,
            status=202,
            errors=("invalid_reminder_id", "no_phone_device", "rate_limit_exceeded", "insufficient_scope"),
            tag="phone",
            extra={"path": {"reminder_id": {"pattern": reminders.REMINDER_ID.pattern}}},
        ),
        Endpoint(
            "POST",
            "/v1/interactions",
            create_interaction,
            "Ask the phone a question with 2-4 answers, a typed reply, or both",
            auth=CALLERS,
            body=interaction_models.InteractionCreate,
            response=interaction_models.InteractionOut,
            status=201,
            errors=(
                "too_many_pending",
                "invalid_callback_url",
                "callback_url_not_allowed",
                "callback_url_conflict",
                *GATED,
            ),
            tag="phone",
            description=CREATE_DESCRIPTION,
            extra={
                "also": {200: "A duplicate: the existing interaction, no second prompt"},
                "callback": CALLBACK,
            },
        ),
        Endpoint(
            "GET",
            "/v1/interactions/{interaction_id}",
            get_interaction,
            f"Poll a question, waiting up to `wait` seconds (0-{interactions.WAIT_MAX_S}) for the answer",
            auth=CALLERS,
            response=interaction_models.InteractionOut,
            description="The first read after the answer carries the phone's typed reply (`text`), "
            "which the server then forgets: later reads say `text_already_read`. A question asked "
            "with `callback_url` shows how its delivery stands under `callback`.",
            errors=("not_found", "invalid_wait"),
            tag="phone",
            extra={"query": [WAIT]},
        ),
        Endpoint(
            "POST",
            "/v1/interactions/{interaction_id}/answer",
            answer_interaction,
            "The phone answers (first answer wins)",
            auth=Accept.DEVICE,
            body=interaction_models.Answer,
            response=interaction_models.InteractionOut,
            errors=(
                "not_found",
                "invalid_choice",
                "choice_required",
                "text_required",
                "text_not_allowed",
                "text_too_long",
                "invalid_text",
                "already_answered",
                "interaction_expired",
                "not_a_phone",
            ),
            tag="phone",
        ),
        Endpoint(
            "POST",
            "/v1/devices/{device_id}/ring",
            ring_device,
            "Ring the phone (fire-and-forget)",
            auth=CALLERS,
            response=ring.RingOut,
            status=202,
            errors=("not_found", *GATED),
            tag="phone",
        ),
    ]
    # The phone's pull route: the connector's send_file parks documents, and no credential could
    # send one through a public POST (it needs files:send, which sender tokens never hold), so
    # POST /v1/documents stays the specification's plain 404 (``core.api.api_routes``).
    listed.append(
        Endpoint(
            "GET",
            "/v1/documents/{document_id}",
            pull_document,
            "The phone pulls its parked document",
            auth=Accept.DEVICE,
            response=documents.PulledDocument,
            errors=("not_found", "not_a_phone"),
            tag="phone",
        )
    )
    return listed
