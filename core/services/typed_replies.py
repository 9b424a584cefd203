"""Typed replies to questions: what the phone may send beside (or instead of) a choice, and how the
text waits for the caller who asked.

The phone seals the text to the server's key (``core.domain.typed_reply``). The server opens it
twice, each time only in memory for the call: when the phone answers, to check it against the
question (so the phone, not the caller, hears that it is too long); and when the caller's first
read takes it. In between it waits in ``interactions.answer_text`` sealed at rest with a key
derived from the server key and the question's id (NaCl secretbox); the read that takes it clears
the column and sets ``text_read_at`` in the same statement, so it is handed over once, on whichever
replica reads first, and a later read sees only that it was. An answer callback
(``core.services.callback_delivery``) is such a read too, but one that takes the text only once the
receiver answered 2xx. An unread text goes with its interaction a day after the question's expiry
(``core.services.maintenance``). Nothing logs it.
docs/protocol.md ("Typed replies") says why it is kept this way.
"""

from __future__ import annotations

import base64
from typing import NamedTuple

import nacl.exceptions
import nacl.secret
from sqlalchemy import update
from sqlmodel import col

from core.domain.typed_reply import open_typed_reply
from core.errors import RelayError
from core.runtime.tx import Tx
from core.server_keys import ServerKeys
from core.store.tables import Interaction

TEXT_DEFAULT_MAX_CHARS = 500  # a question's text_max_chars when allow_text is given alone
TEXT_MAX_CHARS = 1000  # the most a caller may allow (the question's own limit)


class Question(NamedTuple):
    """What an answer is checked against."""

    interaction_id: str
    choice_count: int
    text_max_chars: int | None  # None: it takes no typed reply


def check_answer(
    tx: Tx, row: Question, phone_key: str, *, choice_index: int | None, sealed_text: str | None
) -> bytes | None:
    """Hold the phone's answer to what the question offered: a choice when it has choices, a text
    when it takes one (and must, with no choices); ``phone_key``: the answering phone's public key
    (standard base64). Returns the text sealed at rest, if one came."""
    if row.choice_count == 0:
        if choice_index is not None:
            raise RelayError("invalid_choice", "This question has no choices; send its text alone.")
        if sealed_text is None:
            raise RelayError("text_required")
    elif choice_index is None:
        raise RelayError("choice_required", details={"choices": row.choice_count})
    elif choice_index >= row.choice_count:
        raise RelayError("invalid_choice", details={"choices": row.choice_count})
    if sealed_text is None:
        return None
    if row.text_max_chars is None:
        raise RelayError("text_not_allowed")
    try:
        blob = base64.b64decode(sealed_text, validate=True)
        box = tx.keys.box_with(base64.b64decode(phone_key))
        text = open_typed_reply(box, blob, interaction_id=row.interaction_id)
    except ValueError as error:  # not base64 (binascii.Error), not ASCII, or a TypedReplyError
        raise RelayError("invalid_text") from error
    if len(text) > row.text_max_chars:
        raise RelayError("text_too_long", details={"chars": len(text), "max": row.text_max_chars})
    return _box(tx.keys, row.interaction_id).encrypt(text.encode("utf-8"))


def take_text(tx: Tx, row: Interaction) -> str | None:
    """The waiting text of ``row``, taken: None when there is none or another read took it first."""
    sealed = row.answer_text
    if sealed is None:
        return None
    if not mark_text_read(tx, row.interaction_id):
        tx.session.refresh(row)  # another read took it: this one says so
        return None
    return _open(tx.keys, row.interaction_id, sealed)


def waiting_text(keys: ServerKeys, row: Interaction) -> str | None:
    """The waiting text of ``row``, left waiting: for an answer callback, whose delivery takes it
    only once the receiver acknowledged it (``mark_text_read``)."""
    return None if row.answer_text is None else _open(keys, row.interaction_id, row.answer_text)


def mark_text_read(tx: Tx, interaction_id: str) -> bool:
    """Clear the waiting text and record that it was read; False when there was none (another
    read took it first)."""
    taken = tx.session.execute(
        update(Interaction)
        .where(col(Interaction.interaction_id) == interaction_id, col(Interaction.answer_text).is_not(None))
        .values(answer_text=None, text_read_at=tx.now())
    )
    return getattr(taken, "rowcount", 0) == 1


def _open(keys: ServerKeys, interaction_id: str, sealed: bytes) -> str | None:
    try:
        return _box(keys, interaction_id).decrypt(sealed).decode("utf-8")
    except nacl.exceptions.CryptoError:
        return None  # sealed under another server key (it was replaced): it is gone either way


def _box(keys: ServerKeys, interaction_id: str) -> nacl.secret.SecretBox:
    return nacl.secret.SecretBox(keys.derived_key(f"interaction-text:{interaction_id}"))
