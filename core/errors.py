"""The one error catalogue: a stable code, its HTTP status and a default message.

REST renders these once (``core.api.errors``), the connector once (tool errors). Services raise
``RelayError`` with a catalogue code; nothing else decides a status.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    status: int
    message: str
    flat: bool = False  # authentication failures use the flat shape {error, message?}
    retry_after_s: int = 0  # a 429's Retry-After when its raiser knows no better (every 429 has one)


CATALOGUE: dict[str, ErrorSpec] = {
    # Authentication layer (flat shape).
    "missing_token": ErrorSpec(401, "Send the token as 'Authorization: Bearer <token>'.", flat=True),
    "invalid_token": ErrorSpec(401, "", flat=True),
    # Generic request problems.
    "invalid_json": ErrorSpec(400, "The body is not valid JSON."),
    "invalid_body": ErrorSpec(400, "The body does not match the expected fields."),
    "unsupported_content_type": ErrorSpec(415, "Send the body as application/json."),
    "method_not_allowed": ErrorSpec(405, "This route does not take that method."),
    "body_too_large": ErrorSpec(413, "The body is larger than this route accepts."),
    "invalid_arguments": ErrorSpec(400, "The tool arguments are out of bounds."),
    "body_incomplete": ErrorSpec(400, "The connection closed before the whole body arrived."),
    "invalid_id": ErrorSpec(400, "The id is not well-formed."),
    "invalid_public_key": ErrorSpec(400, "public_key must be standard base64 of 32 bytes."),
    # Pairing.
    "invalid_code": ErrorSpec(400, "The pairing code is wrong, expired or already used."),
    "pairing_expired": ErrorSpec(
        410, "The pairing code expired or was never confirmed; start pairing again."
    ),
    "too_many_attempts": ErrorSpec(
        429, "Too many wrong pairing codes; wait before trying again.", retry_after_s=60
    ),
    "not_a_phone": ErrorSpec(403, "Only the phone can do this."),
    # Who may register a phone (core.services.signup).
    "registration_closed": ErrorSpec(
        403, "This server takes no new phones without an invite (or none at all); ask its owner for one."
    ),
    "invalid_invite": ErrorSpec(403, "The invite is wrong, already used or expired."),
    # Connector consent (the OAuth consent page).
    "consent_expired": ErrorSpec(410, "The consent request expired; start connecting again from the app."),
    "consent_not_confirmed": ErrorSpec(409, "Confirm the code on your phone first."),
    "consent_decided": ErrorSpec(409, "This consent request was already answered."),
    "already_registered": ErrorSpec(409, "This device is already registered."),
    "invalid_registration": ErrorSpec(400, "The push registration challenge does not match."),
    "unsupported_push_service": ErrorSpec(
        400, "This server pushes through no such service (details name those push_registrations takes)."
    ),
    "push_endpoint_not_allowed": ErrorSpec(
        400,
        "The web-push endpoint must be an https URL on a push service this server sends to (details.hosts).",
    ),
    # Relay and streams.
    "invalid_blob": ErrorSpec(400, "blob must be standard base64 of an envelope v1 (at least 41 bytes)."),
    "invalid_envelope_type": ErrorSpec(400, "type is not an envelope type this server relays."),
    "envelope_too_large": ErrorSpec(413, "The envelope is larger than this server relays."),
    "feature_disabled": ErrorSpec(403, "This feature is turned off on this server."),
    "invalid_since_id": ErrorSpec(400, "since_id and Last-Event-ID must be a non-negative integer."),
    # Sending.
    "invalid_message": ErrorSpec(400, "message is required: 1-1500 bytes of text."),
    "message_too_long": ErrorSpec(400, "message is longer than 1500 bytes."),
    "invalid_title": ErrorSpec(400, "title must be 1-100 bytes of text."),
    "invalid_url": ErrorSpec(400, "url must be an http or https URL of at most 512 bytes."),
    "invalid_url_title": ErrorSpec(400, "url_title must be 1-100 bytes of text."),
    "invalid_action": ErrorSpec(
        400, "actions: at most 3, each {label, url} (view) or {action: http, label, url, method?, body?}."
    ),
    "invalid_icon": ErrorSpec(400, "icon must be an https URL of at most 512 bytes."),
    "invalid_sequence_id": ErrorSpec(400, "sequence_id is 1-64 characters of A-Z a-z 0-9 . _ ~ -."),
    "invalid_tags": ErrorSpec(400, "tags must be a list of text or a comma list."),
    "invalid_markdown": ErrorSpec(400, "markdown must be true or false."),
    "invalid_ttl": ErrorSpec(400, "ttl must be a number of seconds."),
    "invalid_device": ErrorSpec(400, "device must be a name, an id, or a comma list."),
    "no_matching_device": ErrorSpec(400, "No device of this account matches device; nothing was sent."),
    "payload_too_large": ErrorSpec(413, "The notification is larger than 2048 bytes once serialized."),
    "invalid_attachment": ErrorSpec(400, "The attachment is empty or its type is not a MIME type."),
    "attachment_too_large": ErrorSpec(413, "The attachment is larger than 5 MB."),
    "invalid_sound": ErrorSpec(400, "sound is one of those GET /v1/sounds.json lists."),
    "pushover_feature_unsupported": ErrorSpec(
        400, "This Pushover feature is not offered here (details: feature)."
    ),
    "invalid_topic": ErrorSpec(
        400, "A topic is 1-64 characters of A-Z a-z 0-9 _ - and not one of relaybox's paths."
    ),
    "ntfy_feature_unsupported": ErrorSpec(400, "This ntfy feature has no meaning here (details: feature)."),
    "invalid_timestamp": ErrorSpec(400, "timestamp must be a Unix time in whole seconds."),
    "invalid_delay": ErrorSpec(400, "delay or at must be a time 10 s to 3 days from now."),
    "delay_unsupported": ErrorSpec(400, "This send cannot be scheduled: send it at its time."),
    "too_many_scheduled": ErrorSpec(409, "The account keeps as many scheduled sends as it may."),
    # Urgent until acknowledged (repeat, expire, receipts).
    "repeat_requires_urgent": ErrorSpec(400, 'repeat and expire are taken only with priority "urgent".'),
    "invalid_repeat": ErrorSpec(400, "repeat must be a whole number of seconds (details: min, max)."),
    "invalid_expire": ErrorSpec(400, "expire must be a whole number of seconds (details: min, max)."),
    "receipt_not_found": ErrorSpec(404, "No receipt of yours has that id."),
    "too_many_urgent": ErrorSpec(
        429, "The account already has as many urgent notifications repeating as it may.", retry_after_s=30
    ),
    # Phone operations.
    "fire_at_too_soon": ErrorSpec(400, "at is too soon (the minimum lead is in details)."),
    "fire_at_too_far": ErrorSpec(400, "at must be at most 365 days from now."),
    "invalid_reminder_id": ErrorSpec(400, "A reminder id is rmd_ followed by 32 lowercase hex characters."),
    "invalid_wait": ErrorSpec(400, "wait must be a whole number of seconds."),
    "invalid_choice": ErrorSpec(400, "choice_index is not one of the offered choices."),
    "choice_required": ErrorSpec(400, "This question has choices: send choice_index (a text may come too)."),
    "text_required": ErrorSpec(400, "This question takes a typed reply alone: send sealed_text."),
    "text_not_allowed": ErrorSpec(
        400, "This question takes no typed reply (it was asked without allow_text)."
    ),
    "text_too_long": ErrorSpec(
        400, "The typed reply is longer than the question allows (details: chars, max)."
    ),
    "invalid_text": ErrorSpec(
        400, "sealed_text does not open as this question's text sealed by this phone to the server's key."
    ),
    "already_answered": ErrorSpec(409, "The first answer already won."),
    "interaction_expired": ErrorSpec(409, "The question expired before it was answered."),
    "invalid_callback_url": ErrorSpec(
        400, "callback_url must be an https URL (at most 2048 bytes) naming a host, no userinfo or fragment."
    ),
    "callback_url_not_allowed": ErrorSpec(
        400, "callback_url names a private or loopback host, which this server does not call."
    ),
    "callback_url_conflict": ErrorSpec(
        409, "This question is already asked, with another callback_url or none; details.id names it."
    ),
    "too_many_pending": ErrorSpec(429, "The account already has 10 pending questions.", retry_after_s=30),
    "invalid_filename": ErrorSpec(400, "The filename is unsafe or its extension is not allowed."),
    "invalid_content": ErrorSpec(400, "The document content must not be empty."),
    "content_too_large": ErrorSpec(413, "The document content is larger than 131072 bytes."),
    "phone_app_outdated": ErrorSpec(426, "The phone app is too old for this; nothing was sent."),
    "phone_app_unknown": ErrorSpec(428, "The phone never reported its app version; nothing was sent."),
    # File transfer (broker and presigned object URLs).
    "transfer_too_large": ErrorSpec(413, "The transfer is larger than this server accepts."),
    "invalid_chunk_layout": ErrorSpec(
        400, "chunk_size and size give more chunks, or larger ones, than allowed."
    ),
    "invalid_chunk_index": ErrorSpec(400, "A chunk index is outside the transfer."),
    "storage_quota_exceeded": ErrorSpec(
        409, "The account's open transfers already hold as many bytes as it may store."
    ),
    "invalid_signature": ErrorSpec(403, "The URL's signature is missing, forged or expired."),
    "upload_too_large": ErrorSpec(413, "The upload is larger than the URL allows; nothing was stored."),
    "upload_size_mismatch": ErrorSpec(400, "The upload is shorter than the URL's size; nothing was stored."),
    # Tokens and scopes.
    "invalid_scope": ErrorSpec(400, "That scope cannot be held by a sender token."),
    "invalid_priority": ErrorSpec(400, "priority must be one of min, low, default, high, urgent."),
    "priority_capped": ErrorSpec(403, "The requested priority is above this token's priority cap."),
    "insufficient_scope": ErrorSpec(403, "The credential lacks the scope this operation needs."),
    "forbidden": ErrorSpec(403, "This credential cannot use this route."),
    "limit_reached": ErrorSpec(409, "The account holds as many of these as it may."),
    # Lookups and state.
    "not_found": ErrorSpec(404, "Not found."),
    "no_phone_device": ErrorSpec(409, "The account has no paired phone."),
    # Limits.
    "rate_limit_exceeded": ErrorSpec(429, "Rate limit exceeded.", retry_after_s=5),
    # A dependency (database, Redis) is not answering: try again shortly (core.availability).
    "unavailable": ErrorSpec(503, "The service is briefly unavailable; try again shortly."),
    # Anything unexpected.
    "internal_error": ErrorSpec(500, "Something went wrong on our side."),
}


class RelayError(Exception):
    """A failure with a stable catalogue code; the only exception a service raises on purpose."""

    def __init__(
        self,
        code: str,
        message: str | None = None,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        if code not in CATALOGUE:
            raise KeyError(f"unknown error code {code!r}")
        self.code = code
        self.spec = CATALOGUE[code]
        self.message = message if message is not None else self.spec.message
        self.details = details
        self.headers = dict(headers or {})
        if self.spec.status == 429:
            self.headers.setdefault("Retry-After", str(self.spec.retry_after_s))
        super().__init__(f"{code}: {self.message}")

    @property
    def status(self) -> int:
        return self.spec.status


def invalid_body(error: ValidationError, *, at: tuple[str, ...] = ()) -> RelayError:
    """400 ``invalid_body`` naming each field (at most 20) the model refused; ``at`` is where in the
    body the validated object sits, for one validated after the body itself."""
    problems = [
        {"field": ".".join(str(part) for part in (*at, *item["loc"])) or "(body)", "problem": item["msg"]}
        for item in error.errors(include_url=False, include_input=False)
    ]
    return RelayError("invalid_body", details={"errors": problems[:20]})
