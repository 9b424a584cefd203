"""The phone-capability gate: the account's phone, and whether its app build supports a feature.

One rule for every feature: a build older than the feature's minimum is refused with 426
``phone_app_outdated`` (nothing is sent); a phone that never reported its build is allowed, and
the caller is warned that support is uncertain (``UNKNOWN_BUILD_WARNING``, in the answer's
``warnings`` where it has them: reminders, ring, documents, clears). The CLI phone reports no build
unless asked to (``--app-build``), so a refusal there would refuse the quick start;
``docs/protocol.md`` ("One phone-capability rule") says why documents left the specification's 428.

| feature            | minimum (setting)                  |
|--------------------|------------------------------------|
| reminders          | ``min_build_reminders``            |
| interactions       | ``min_build_interactions``         |
| interaction_text   | ``min_build_interaction_text``     |
| ring               | ``min_build_ring``                 |
| documents          | ``min_build_documents``            |
| notification_clear | ``min_build_notification_clear``   |
| urgent_repeat      | ``min_build_urgent_repeat``        |

``interaction_text`` gates a question with ``allow_text`` (the phone must offer a text box);
``notification_clear`` a clear (an older app would show the unknown payload as a new message);
``urgent_repeat`` an urgent send with ``repeat`` (the phone must alert again until acknowledged,
and offer the acknowledgement: an older build shows it once and never acknowledges).
"""

from __future__ import annotations

import enum

from sqlmodel import col, select

from core.errors import RelayError
from core.runtime.tx import Tx
from core.store.tables import Device

UNKNOWN_BUILD_WARNING = "the phone has never reported its app version, so support for this is uncertain"


class Feature(enum.Enum):
    REMINDERS = "reminders"
    INTERACTIONS = "interactions"
    INTERACTION_TEXT = "interaction_text"
    RING = "ring"
    DOCUMENTS = "documents"
    NOTIFICATION_CLEAR = "notification_clear"
    URGENT_REPEAT = "urgent_repeat"


def account_phone(tx: Tx, account_id: str) -> Device:
    """The account's phone, or 409 ``no_phone_device``."""
    phone = tx.session.exec(
        select(Device)
        .where(col(Device.account_id) == account_id, col(Device.surface_kind) == "phone")
        .order_by(col(Device.created_at))
    ).first()
    if phone is None:
        raise RelayError("no_phone_device")
    return phone


def gate(tx: Tx, phone: Device, feature: Feature) -> list[str]:
    """Raise when the phone cannot do ``feature``; return the warnings the caller should see."""
    minimum: int = getattr(tx.settings, f"min_build_{feature.value}")
    if phone.app_build is None:
        return [UNKNOWN_BUILD_WARNING]
    if phone.app_build < minimum:
        raise RelayError("phone_app_outdated", details={"app_build": phone.app_build, "minimum": minimum})
    return []
