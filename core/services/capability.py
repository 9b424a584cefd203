"""The phone-capability gate: the account's phone, and whether its app build supports a feature.

| feature          | build too old          | never reported a build     |
|------------------|------------------------|----------------------------|
| reminders        | 426 phone_app_outdated | allowed, with a warning    |
| interactions     | 426                    | allowed silently           |
| interaction_text | 426                    | allowed silently           |
| ring             | 426                    | allowed, with a warning    |
| documents        | 426                    | 428 phone_app_unknown      |
| notification_clear | 426                  | allowed silently           |
| urgent_repeat    | 426                    | allowed silently           |

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


# What a phone that never reported a build gets without a warning (the rest warn, or refuse).
SILENT_WHEN_UNKNOWN = (
    Feature.INTERACTIONS,
    Feature.INTERACTION_TEXT,
    Feature.NOTIFICATION_CLEAR,
    Feature.URGENT_REPEAT,
)


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
        if feature is Feature.DOCUMENTS:
            raise RelayError("phone_app_unknown")
        return [] if feature in SILENT_WHEN_UNKNOWN else [UNKNOWN_BUILD_WARNING]
    if phone.app_build < minimum:
        raise RelayError("phone_app_outdated", details={"app_build": phone.app_build, "minimum": minimum})
    return []
