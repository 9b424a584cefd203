"""Answer callbacks, the question's side: a caller that cannot hold a long poll (CI, cron,
serverless) names an https ``callback_url`` and is POSTed the interaction when it is answered or
expires (``core.services.callback_delivery`` sends it).

The URL is checked when the question is asked (``checked_url``); its row is written in the same
transaction as the question, due at the expiry with the event ``expired``, and switched to
``answered``, due at once, in the same transaction as the answer (``on_answered``), so no answer
is ever without its callback. Each switch wakes every replica's sender through the fan-out
(``CALLBACKS_TOPIC``). The signing secret is derived from the server key and the question's id
(``secret_key``), never stored: the create response hands it to the caller, every attempt derives
it again.
"""

from __future__ import annotations

from core.domain.outbound import plainly_private, url_host, url_problem
from core.domain.secrets import new_prefixed_id
from core.domain.webhooks import new_secret_text
from core.errors import RelayError
from core.runtime.events import Published
from core.runtime.tx import Tx
from core.server_keys import ServerKeys
from core.services.interaction_models import CallbackStatus
from core.services.interaction_statements import SWITCH_TO_ANSWERED
from core.settings import Settings
from core.store.tables import Interaction, InteractionCallback

CALLBACKS_TOPIC = "callbacks"  # a callback fell due or will: senders look again for the earliest


def checked_url(settings: Settings, url: str) -> str:
    """``url`` if it may be a callback URL: 400 ``invalid_callback_url`` for its shape, 400
    ``callback_url_not_allowed`` for a host that is plainly private (a loopback name, a private,
    loopback or link-local address) unless ``callbacks_allow_private``. A name that resolves to
    such an address is refused at each delivery instead (``address_not_allowed``)."""
    problem = url_problem(url, "callback_url")
    if problem is not None:
        raise RelayError("invalid_callback_url", problem)
    if not settings.callbacks_allow_private and plainly_private(url_host(url)):
        raise RelayError("callback_url_not_allowed")
    return url


def secret_key(keys: ServerKeys, interaction_id: str) -> bytes:
    """The 32-byte key that signs this question's callbacks."""
    return keys.derived_key(f"interaction-callback:{interaction_id}")


def secret_text(keys: ServerKeys, interaction_id: str) -> str:
    """The key as the caller is given it (``whsec_…``)."""
    return new_secret_text(secret_key(keys, interaction_id))


def schedule(tx: Tx, row: Interaction, url: str) -> None:
    """Keep ``row``'s callback, due at its expiry as ``expired`` until an answer switches it."""
    tx.session.add(
        InteractionCallback(
            interaction_id=row.interaction_id,
            account_id=row.account_id,
            url=url,
            event="expired",
            webhook_id=new_prefixed_id("evt"),
            due_at=row.expires_at,
        )
    )
    tx.emit(Published(CALLBACKS_TOPIC, str(row.expires_at)))


def on_answered(tx: Tx, interaction_id: str) -> None:
    """The question was answered: its callback, if it has one, now tells of the answer, at once,
    as a new event (a webhook-id of its own)."""
    now = tx.now()
    switched = SWITCH_TO_ANSWERED.rows(
        tx.connection(), interaction_id=interaction_id, webhook_id=new_prefixed_id("evt"), now=now
    )
    if switched:
        tx.emit(Published(CALLBACKS_TOPIC, str(now)))


def url_of(tx: Tx, interaction_id: str) -> str | None:
    """The URL the question's callback goes to, or None when it was asked without one."""
    row = tx.session.get(InteractionCallback, interaction_id)
    return None if row is None else row.url


def status_of(tx: Tx, interaction_id: str) -> CallbackStatus | None:
    """How the question's callback stands, or None when it was asked without one."""
    row = tx.session.get(InteractionCallback, interaction_id)
    if row is None:
        return None
    return callback_status(row.delivered_at, row.failed_at, row.attempts, row.last_error, row.last_status)


def callback_status(
    delivered_at: int | None,
    failed_at: int | None,
    attempts: int,
    last_error: str | None,
    last_status: int | None,
) -> CallbackStatus:
    """A callback's columns as the caller is told them."""
    state = "delivered" if delivered_at is not None else "failed" if failed_at is not None else "pending"
    return CallbackStatus(state=state, attempts=attempts, last_error=last_error, last_status=last_status)
