"""Server-composed payloads: the plaintext inside envelopes from sender ``server``.

Field order is part of the contract (both platforms serialize byte-identically), so each builder
returns a dict whose insertion order is the documented order, and ``encode`` writes compact JSON.
Optional fields are omitted when absent, never sent as null. ``docs/protocol.md`` lists them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.domain.canonical import canonical_json
from core.domain.notification import Notification
from core.domain.urgent import UrgentReceipt


@dataclass(frozen=True, slots=True)
class TokenSummary:
    token_id: str
    label: str
    scope: str | None
    priority_cap: str
    created_at: int


def token_update(tokens: list[TokenSummary], *, at: int) -> dict[str, Any]:
    """The account's active sender tokens after a create or revoke (never a token's plaintext)."""
    return {
        "type": "token_update",
        "at": at,
        "tokens": [
            _without_none(
                {
                    "id": t.token_id,
                    "label": t.label,
                    "scope": t.scope,
                    "priority_cap": t.priority_cap,
                    "created_at": t.created_at,
                }
            )
            for t in tokens
        ],
    }


def sender_sequence(sender: str, sequence: str) -> str:
    """A sender's sequence as the devices see it: ``<sender id>:<sequence>``. A caller's own
    ``sequence_id`` holds no ``:`` (its alphabet), so no sender can name another's sequence, nor a
    tag a device app keeps for itself (``ring``, ``int_…``, ``rcp_…``: none holds a ``:``)."""
    return f"{sender}:{sequence}"


def notification(
    note: Notification,
    *,
    msg_id: str,
    sent_at: int,
    sender: str,
    attachment: dict[str, Any] | None = None,
    urgent: UrgentReceipt | None = None,
) -> dict[str, Any]:
    """A server-composed notification (send API, shim, connector) from ``sender``
    (``Principal.sender_id``): its ``sequence_id`` is the caller's, else the notification's id,
    qualified by the sender (``sender_sequence``), so that a later one of the same sender and
    sequence replaces it and one of another sender never does. ``attachment`` is the reference
    to a parked attachment (``core.services.attachments.park``), with the key to open it;
    ``urgent``: the phone alerts again every ``repeat`` seconds until ``expire_at``, unless it is
    acknowledged (the receipt's device route) or an ``urgent_stop`` for ``receipt`` comes first."""
    return _without_none(
        {
            "type": "notification",
            "id": msg_id,
            "sent_at": sent_at,
            "sequence_id": sender_sequence(sender, note.sequence_id or msg_id),
            "title": note.title,
            "message": note.message,
            "priority": note.priority,
            "receipt": urgent.receipt_id if urgent else None,
            "repeat": urgent.repeat_s if urgent else None,
            "expire_at": urgent.expires_at if urgent else None,
            "tags": list(note.tags) or None,
            "url": note.url,
            "url_title": note.url_title,
            "icon": note.icon,
            "actions": [action.payload() for action in note.actions] or None,
            "markdown": True if note.markdown else None,
            "attachment": attachment,
        }
    )


def notification_clear(*, sender: str, sequence_id: str, at: int) -> dict[str, Any]:
    """Take ``sender``'s notification of ``sequence_id`` (a send's ``sequence_id``, else its
    ``id``) away, qualified as the notification was (``sender_sequence``); the phone ignores a
    sequence it does not show."""
    return {"type": "notification_clear", "sequence_id": sender_sequence(sender, sequence_id), "at": at}


def urgent_stop(*, receipt_id: str, reason: str) -> dict[str, Any]:
    """Stop repeating the urgent notification of ``receipt_id``: it was ``acknowledged`` (on any
    device) or ``cancelled`` by its sender. A phone ignores receipts it does not know."""
    return {"type": "urgent_stop", "receipt": receipt_id, "reason": reason}


def reminder(*, reminder_id: str, fire_at: int, message: str) -> dict[str, Any]:
    """Arm a reminder on the phone; the phone fires it itself at ``fire_at``."""
    return {"type": "reminder", "reminder_id": reminder_id, "fire_at": fire_at, "message": message}


def reminder_cancel(*, reminder_id: str) -> dict[str, Any]:
    """Disarm a reminder; the phone ignores ids it does not know."""
    return {"type": "reminder_cancel", "reminder_id": reminder_id}


def interaction_request(
    *,
    interaction_id: str,
    question: str,
    choices: list[str],
    expires_at: int,
    text_max_chars: int | None = None,
) -> dict[str, Any]:
    """A question for the phone; it answers with the index of the tapped choice and, when
    ``text_max_chars`` is there, may add a typed reply of at most that many characters (with no
    choices, the typed reply is the answer: ``core.domain.typed_reply``)."""
    return _without_none(
        {
            "type": "interaction_request",
            "id": interaction_id,
            "question": question,
            "choices": choices,
            "expires_at": expires_at,
            "text_max_chars": text_max_chars,
        }
    )


def interaction_closed(
    *, interaction_id: str, answered_by: str, answered_by_name: str, choice_index: int | None, at: int
) -> dict[str, Any]:
    """The question ``interaction_id`` was answered (by the device ``answered_by``, with
    ``choice_index`` unless only a typed reply answered it): every device of the account closes it,
    the one that answered too (the same phone may run twice). Never the typed reply. A question that
    expires sends nothing: each phone closes it at its ``expires_at`` by itself."""
    return _without_none(
        {
            "type": "interaction_closed",
            "id": interaction_id,
            "reason": "answered",
            "answered_by": {"device_id": answered_by, "name": answered_by_name},
            "choice_index": choice_index,
            "at": at,
        }
    )


def document(*, document_id: str, filename: str, content: str) -> dict[str, Any]:
    """A text document for the phone's Downloads folder (parked as ciphertext until pulled)."""
    return {"type": "document", "document_id": document_id, "filename": filename, "content": content}


def encode(payload: dict[str, Any]) -> bytes:
    return canonical_json(payload)


def _without_none(fields: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}
