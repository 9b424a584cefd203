"""Every device of the account hears when a question is answered (``interaction_closed``), so a
question answered on one device closes on the others: the phone's other app (a second tab, the
service worker's notification, another shell) and its computers. Sent in the transaction that
records the answer; expiry sends nothing (each phone closes it at ``expires_at`` by itself, as an
urgent alert stops at its ``expire_at``)."""

from __future__ import annotations

from core.domain import payloads
from core.domain.secrets import new_prefixed_id
from core.runtime.tx import Tx
from core.services.account_devices import account_devices
from core.services.delivery import Addressee, send_server_messages


def announce_answer(
    tx: Tx,
    account_id: str,
    interaction_id: str,
    *,
    answered_by: str,
    choice_index: int | None,
    expires_at: int,
) -> None:
    """Queue ``interaction_closed`` for each device of ``account_id`` until the question would have
    expired (a device that reconnects later closes it by its own clock); pushed inline to a device
    with a push service, so a closed web phone replaces the question's notification."""
    devices = account_devices(tx, account_id)
    name = next((device.name for device in devices if device.device_id == answered_by), "")
    now = tx.now()
    payload = payloads.interaction_closed(
        interaction_id=interaction_id,
        answered_by=answered_by,
        answered_by_name=name,
        choice_index=choice_index,
        at=now,
    )
    send_server_messages(
        tx,
        [Addressee(device, new_prefixed_id("msg"), target=device.push_target()) for device in devices],
        payload,
        push_type="interaction_closed",
        ttl_s=max(1, expires_at - now),
        high_priority=False,
        account_id=account_id,
    )
