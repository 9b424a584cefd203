"""Questions put to the phone with 2-4 answer buttons, a typed reply beside them, or a typed reply
alone; the first answer wins.

The question and choices exist only in memory and inside the envelope to the phone. The server
keeps a keyed digest (to recognise a duplicate request until the interaction expires, even after
an answer), the number of choices, the answer's index and time, and a typed reply sealed until the
caller's first read takes it (``core.services.typed_replies``); with a ``callback_url``, the
state of its callback (``core.services.callbacks``). The wire models live in
``core.services.interaction_models`` and are re-exported here with the operations.
"""

from __future__ import annotations

import hashlib
import hmac

from sqlmodel import col, func, select

from core.domain import payloads
from core.domain.canonical import canonical_json
from core.domain.secrets import new_prefixed_id
from core.errors import RelayError
from core.principal import SCOPE_APPROVALS_WRITE, Principal
from core.runtime.core import Core
from core.runtime.events import Published
from core.runtime.marks import quick_read
from core.runtime.tx import Tx
from core.services import callbacks
from core.services.capability import Feature, account_phone, gate
from core.services.delivery import send_server_message
from core.services.interaction_closed import announce_answer
from core.services.interaction_models import Answer as Answer
from core.services.interaction_models import CallbackStatus, Status
from core.services.interaction_models import InteractionCreate as InteractionCreate
from core.services.interaction_models import InteractionOut as InteractionOut
from core.services.interaction_statements import (
    ANSWER,
    ANSWERING,
    STATE,
    STATE_WIDTH,
    Callback,
    InteractionState,
    StateRow,
)
from core.services.limits import charge_send_class
from core.services.long_poll import until_settled
from core.services.typed_replies import Question, check_answer, take_text
from core.store.tables import Account, Interaction

MAX_PENDING = 10
# Waiting for the answer: what the REST long poll's ``wait`` and check_reply's ``wait_seconds``
# default to, and the most any wait lasts (poll_interaction clamps to it; the tools' schemas stop there).
WAIT_DEFAULT_S = 20
WAIT_MAX_S = 45


def answered_topic(interaction_id: str) -> str:
    return f"interaction:{interaction_id}"


def create_interaction(tx: Tx, principal: Principal, *, body: InteractionCreate, ip: str) -> InteractionOut:
    """Ask the phone; a duplicate (same key, or same question and choices from the same caller)
    within the interaction's lifetime returns the existing one (handing over a typed reply nobody
    read yet, and the secret of its callback) and sends no second prompt. A duplicate naming
    another ``callback_url`` than the first (or one where it had none) is 409
    ``callback_url_conflict``: the first stays, and its secret is not handed out for another URL."""
    principal.require_scope(SCOPE_APPROVALS_WRITE)
    callback_url = (
        None if body.callback_url is None else callbacks.checked_url(tx.settings, body.callback_url)
    )
    # One creator at a time per account (a row lock on PostgreSQL): the duplicate check and the
    # pending cap then hold under concurrent requests.
    tx.session.exec(select(Account).where(col(Account.account_id) == principal.account_id).with_for_update())
    now = tx.now()
    digest = _dedupe_digest(tx, principal, body)
    existing = tx.session.exec(
        select(Interaction).where(
            col(Interaction.owner) == principal.owner_key,
            col(Interaction.dedupe_digest) == digest,
            col(Interaction.expires_at) > now,
        )
    ).first()
    if existing is not None:
        first_url = callbacks.url_of(tx, existing.interaction_id)
        if callback_url is not None and callback_url != first_url:
            raise RelayError("callback_url_conflict", details={"id": existing.interaction_id})
        out = interaction_out(existing, now, created=False, text=take_text(tx, existing))
        if first_url is None:
            return out
        return out.model_copy(
            update={"callback_secret": callbacks.secret_text(tx.keys, existing.interaction_id)}
        )
    phone = account_phone(tx, principal.account_id)
    gate(tx, phone, Feature.INTERACTIONS)
    if body.allow_text:
        gate(tx, phone, Feature.INTERACTION_TEXT)
    pending = tx.session.exec(
        select(func.count())
        .select_from(Interaction)
        .where(
            col(Interaction.account_id) == principal.account_id,
            col(Interaction.answered_at).is_(None),
            col(Interaction.expires_at) > now,
        )
    ).one()
    if pending >= MAX_PENDING:
        raise RelayError("too_many_pending", details={"max": MAX_PENDING})
    rate_limit, _ = charge_send_class(tx, principal, ip)
    row = Interaction(
        interaction_id=new_prefixed_id("int"),
        account_id=principal.account_id,
        owner=principal.owner_key,
        dedupe_digest=digest,
        choice_count=len(body.choices),
        created_at=now,
        expires_at=now + body.expires_in_seconds,
        text_max_chars=body.text_limit,
    )
    tx.session.add(row)
    secret = None
    if callback_url is not None:
        callbacks.schedule(tx, row, callback_url)
        secret = callbacks.secret_text(tx.keys, row.interaction_id)
    prompt = payloads.interaction_request(
        interaction_id=row.interaction_id,
        question=body.question,
        choices=body.choices,
        expires_at=row.expires_at,
        text_max_chars=body.text_limit,
    )
    send_server_message(
        tx,
        phone,
        prompt,
        msg_id=new_prefixed_id("msg"),
        push_type="interaction_request",
        ttl_s=body.expires_in_seconds,
        high_priority=True,
    )
    return interaction_out(row, now, created=True).model_copy(
        update={"rate_limit": rate_limit, "callback_secret": secret}
    )


@quick_read
def get_interaction(tx: Tx, principal: Principal, *, interaction_id: str) -> InteractionOut:
    """The interaction's state; 404 for an unknown id or another principal's. A typed reply stays
    waiting (``text_waiting``): ``take_interaction_text`` hands it over. Every waiting poll reads
    this when it opens and when it is woken: one statement (``STATE``), on SQLite on the loop."""
    found = STATE.rows(tx.connection(), interaction_id=interaction_id)
    if not found or found[0][STATE_WIDTH] != principal.owner_key:
        raise RelayError("not_found")
    row = StateRow(*found[0][:STATE_WIDTH])
    callback = Callback(*found[0][STATE_WIDTH + 1 :])
    status = None
    if callback.interaction_id is not None:
        status = callbacks.callback_status(
            callback.delivered_at,
            callback.failed_at,
            callback.attempts or 0,
            callback.last_error,
            callback.last_status,
        )
    return interaction_out(row, tx.now(), callback=status)


def take_interaction_text(tx: Tx, principal: Principal, *, interaction_id: str) -> InteractionOut:
    """The interaction's state with its typed reply, which this read takes: no later read has it."""
    row = _owned(tx, principal, interaction_id)
    text = take_text(tx, row)
    return interaction_out(row, tx.now(), text=text, callback=callbacks.status_of(tx, interaction_id))


async def poll_interaction(
    core: Core, principal: Principal, *, interaction_id: str, wait: int
) -> InteractionOut:
    """The interaction's state, waiting up to ``wait`` seconds (clamped to 0-``WAIT_MAX_S``) for the
    answer, with its typed reply if this is the first read since it came.

    Woken by the answer's fan-out event, which may come from another replica; no transaction is
    held and the database is not polled while waiting.
    """
    current = await _wait_for_answer(core, principal, interaction_id, max(0, min(wait, WAIT_MAX_S)))
    if current.text_waiting:
        return await core.run(take_interaction_text, principal, interaction_id=interaction_id)
    return current


async def _wait_for_answer(
    core: Core, principal: Principal, interaction_id: str, wait: int
) -> InteractionOut:
    return await until_settled(
        core,
        answered_topic(interaction_id),
        lambda: core.run(get_interaction, principal, interaction_id=interaction_id),
        wait,
    )


def answer_interaction(tx: Tx, principal: Principal, *, interaction_id: str, body: Answer) -> InteractionOut:
    """The phone's answer: a choice, a typed reply, or both, as the question allows. The first
    answer wins; a later one is 409 ``already_answered``. Prepared statements throughout
    (``core.services.interaction_statements``): a long poll waits on every answer."""
    device_id = principal.require_device()
    connection = tx.connection()
    answering = ANSWERING.rows(connection, device_id=device_id, interaction_id=interaction_id)
    if not answering:
        # The device was removed since its credential was checked: ``devices.own_device``'s rule,
        # read here in the question's statement rather than by a Session.get of its own.
        raise RelayError("invalid_token")
    principal.require_phone()
    [(account_id, phone_key, question_account, choice_count, text_max_chars)] = answering
    if question_account != account_id:  # no such question (NULL), or another account's
        raise RelayError("not_found")
    question = Question(interaction_id, choice_count, text_max_chars)
    sealed = check_answer(
        tx, question, phone_key, choice_index=body.choice_index, sealed_text=body.sealed_text
    )
    now = tx.now()
    won = ANSWER.rows(
        connection, interaction_id=interaction_id, choice=body.choice_index, sealed=sealed, now=now
    )
    if not won:  # answered first by another tap, or expired (and perhaps swept since)
        lost = STATE.rows(connection, interaction_id=interaction_id)
        answered = bool(lost) and StateRow(*lost[0][:STATE_WIDTH]).answered_at is not None
        raise RelayError("already_answered" if answered else "interaction_expired")
    callbacks.on_answered(tx, interaction_id)
    state = StateRow(*won[0])
    announce_answer(
        tx,
        account_id,
        interaction_id,
        answered_by=device_id,
        choice_index=state.choice_index,
        expires_at=state.expires_at,
    )
    tx.emit(Published(answered_topic(interaction_id), "answered"))
    return interaction_out(state, now)


def _owned(tx: Tx, principal: Principal, interaction_id: str) -> Interaction:
    row = tx.session.get(Interaction, interaction_id)
    if row is None or row.owner != principal.owner_key:
        raise RelayError("not_found")
    return row


def _dedupe_digest(tx: Tx, principal: Principal, body: InteractionCreate) -> str:
    if body.idempotency_key is not None:
        material = b"key\x00" + body.idempotency_key.encode()
    elif body.allow_text:
        material = b"content\x00" + canonical_json([body.question, body.choices, body.text_max_chars])
    else:
        material = b"content\x00" + canonical_json([body.question, body.choices])
    key = tx.keys.derived_key("interaction-dedupe")
    return hmac.new(key, principal.owner_key.encode() + b"\x00" + material, hashlib.sha256).hexdigest()


def interaction_out(
    row: InteractionState,
    now: int,
    *,
    created: bool | None = None,
    text: str | None = None,
    callback: CallbackStatus | None = None,
) -> InteractionOut:
    """The interaction as the caller sees it: ``text`` is a typed reply this read took; ``created``
    only on the answer to a create (a read is not one)."""
    status: Status = "pending"
    if row.answered_at is not None:
        status = "answered"
    elif row.expires_at <= now:
        status = "expired"
    return InteractionOut(
        id=row.interaction_id,
        status=status,
        created=created,
        expires_at=row.expires_at,
        choice_index=row.choice_index,
        answered_at=row.answered_at,
        text=text,
        text_already_read=True if text is None and row.text_read_at is not None else None,
        text_waiting=text is None and row.answer_text is not None,
        callback=callback,
    )
