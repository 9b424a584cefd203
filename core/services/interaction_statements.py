"""The statements of a question's two hot paths, prepared (``PreparedStatement``): the phone's
answer, and the read a waiting long poll makes when it opens and each time it is woken. Through the
ORM, the answer's statements (two gets, a refresh, two updates built and cache-keyed on each call)
cost several times what the database spends on them. ``core.services.interactions`` says when each
runs.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from sqlalchemy import Integer, LargeBinary, String, bindparam, select, update

from core.store.prepared import PreparedStatement
from core.store.tables import Device, Interaction, InteractionCallback

_INTERACTIONS = Interaction.__table__  # type: ignore[attr-defined]
_DEVICES = Device.__table__  # type: ignore[attr-defined]
_CALLBACKS = InteractionCallback.__table__  # type: ignore[attr-defined]
_ID = bindparam("interaction_id", type_=String)


class InteractionState(Protocol):
    """What a caller is told of an interaction (``interactions.interaction_out``): an ``Interaction``
    row, or a ``StateRow`` read without the ORM."""

    @property
    def interaction_id(self) -> str: ...
    @property
    def expires_at(self) -> int: ...
    @property
    def choice_index(self) -> int | None: ...
    @property
    def answered_at(self) -> int | None: ...
    @property
    def text_read_at(self) -> int | None: ...
    @property
    def answer_text(self) -> bytes | None: ...


class StateRow(NamedTuple):
    """An ``InteractionState`` as ``STATE`` and ``ANSWER`` answer it (the columns in this order)."""

    interaction_id: str
    expires_at: int
    choice_index: int | None
    answered_at: int | None
    text_read_at: int | None
    answer_text: bytes | None


_STATE_COLUMNS = [getattr(_INTERACTIONS.c, name) for name in StateRow._fields]


class Callback(NamedTuple):
    """How a question's callback stands (``callbacks.status_from``); all None: it has none."""

    interaction_id: str | None
    delivered_at: int | None
    failed_at: int | None
    attempts: int | None
    last_error: str | None
    last_status: int | None


# An interaction's state and owner, with its callback's (NULLs: it has none): the long poll's read.
_CALLBACK_COLUMNS = [getattr(_CALLBACKS.c, name) for name in Callback._fields]
STATE = PreparedStatement(
    select(*_STATE_COLUMNS, _INTERACTIONS.c.owner, *_CALLBACK_COLUMNS)
    .select_from(
        _INTERACTIONS.outerjoin(_CALLBACKS, _CALLBACKS.c.interaction_id == _INTERACTIONS.c.interaction_id)
    )
    .where(_INTERACTIONS.c.interaction_id == _ID)
)
STATE_WIDTH = len(StateRow._fields)  # STATE's row: the state, then the owner, then the callback

# The answering device (no row: it was removed) and the question it answers (NULLs: no such id).
ANSWERING = PreparedStatement(
    select(
        _DEVICES.c.account_id,
        _DEVICES.c.public_key,
        _INTERACTIONS.c.account_id,
        _INTERACTIONS.c.choice_count,
        _INTERACTIONS.c.text_max_chars,
    )
    .select_from(_DEVICES.outerjoin(_INTERACTIONS, _INTERACTIONS.c.interaction_id == _ID))
    .where(_DEVICES.c.device_id == bindparam("device_id", type_=String))
)

# The answer, if it is the first and the question has not expired: the state it leaves (no row: it
# lost, ``STATE`` says why).
_NOW = bindparam("now", type_=Integer)
ANSWER = PreparedStatement(
    update(_INTERACTIONS)
    .where(
        _INTERACTIONS.c.interaction_id == _ID,
        _INTERACTIONS.c.answered_at.is_(None),
        _INTERACTIONS.c.expires_at > _NOW,
    )
    .values(
        choice_index=bindparam("choice", type_=Integer),
        answered_at=_NOW,
        answer_text=bindparam("sealed", type_=LargeBinary),
    )
    .returning(*_STATE_COLUMNS)
)

# The question's callback, if it has one still to send, switched to tell of the answer at once.
SWITCH_TO_ANSWERED = PreparedStatement(
    update(_CALLBACKS)
    .where(_CALLBACKS.c.interaction_id == _ID, _CALLBACKS.c.due_at.is_not(None))
    .values(
        event="answered",
        webhook_id=bindparam("webhook_id", type_=String),
        due_at=_NOW,
        claim=None,
        attempts=0,
        last_status=None,
        last_error=None,
    )
    .returning(_CALLBACKS.c.interaction_id)
)
