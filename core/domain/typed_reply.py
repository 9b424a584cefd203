"""A typed reply to a question (``interaction_text``): the phone seals it to the server's key, the
server opens it to hand it to the caller who asked. Shared by the server and the reference phone,
so both read and write the same bytes.

The plaintext is compact UTF-8 JSON in this field order: ``type`` (``interaction_text``), ``id``
(the question's ``int_…`` id, so a sealed text cannot be replayed onto another question) and
``text``. ``docs/protocol.md`` ("Typed replies") has the rules around it.
"""

from __future__ import annotations

import json
from typing import Any

from core.domain.canonical import canonical_json
from core.domain.envelope import EnvelopeError, PairBox

TYPE = "interaction_text"


class TypedReplyError(ValueError):
    """The sealed text does not open with the two keys, or is not this question's text."""


def typed_reply(*, interaction_id: str, text: str) -> dict[str, Any]:
    return {"type": TYPE, "id": interaction_id, "text": text}


def seal_typed_reply(box: PairBox, *, interaction_id: str, text: str) -> bytes:
    """The envelope the phone sends: ``box`` is the phone's secret key with the server's public key."""
    return box.seal(canonical_json(typed_reply(interaction_id=interaction_id, text=text)))


def open_typed_reply(box: PairBox, blob: bytes, *, interaction_id: str) -> str:
    """The text inside ``blob``, sealed for question ``interaction_id``; ``box`` is the server's
    secret key with the phone's public key. Raises ``TypedReplyError`` and nothing else."""
    try:
        payload = json.loads(box.open(blob).decode("utf-8"))
    except (EnvelopeError, ValueError) as error:  # UnicodeDecodeError and JSONDecodeError included
        raise TypedReplyError("the sealed text does not open, or is not JSON") from error
    if not isinstance(payload, dict) or payload.get("type") != TYPE or payload.get("id") != interaction_id:
        raise TypedReplyError("the sealed text is not this question's interaction_text")
    text = payload.get("text")
    if not isinstance(text, str) or not text:
        raise TypedReplyError("the sealed text holds no text")
    try:
        text.encode("utf-8")  # JSON's "\ud800" escapes make lone surrogates, which no caller can read
    except UnicodeEncodeError as error:
        raise TypedReplyError("the text is not valid Unicode") from error
    return text
