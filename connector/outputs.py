"""What each connector tool returns (its output schema). Thin views of the core's outputs: the
rate-limit bookkeeping the REST routes turn into headers stays out of the model's sight."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, Field

from core.services.device_list import DeviceSummary
from core.services.interaction_models import CallbackStatus, InteractionOut
from core.services.receipts import AcknowledgedBy, ReceiptOut
from core.services.send import DeliveredTo


class Delivered(BaseModel):
    device_id: str
    type: str = Field(description="phone, extension, pwa, cli or desktop")


def delivered(devices: list[DeliveredTo]) -> list[Delivered]:
    return [Delivered(device_id=d.device_id, type=d.type) for d in devices]


class NotificationSent(BaseModel):
    id: str = Field(description="The notification's id (msg_…)")
    sequence_id: str = Field(
        description="Pass it as sequence_id to replace this notification, or to clear_notification"
    )
    delivered_to: list[Delivered] = Field(
        description="The devices it was encrypted to and sent or queued for"
    )
    warnings: list[str] = Field(description="Fields that were trimmed or device names that matched nothing")
    receipt: str | None = Field(
        default=None,
        description="With priority urgent and repeat: pass it to check_receipt or cancel_receipt",
    )


class NotificationCleared(BaseModel):
    sequence_id: str
    delivered_to: list[Delivered] = Field(description="The devices told to remove it")
    warnings: list[str] = Field(description="Device names that matched nothing")


class DeviceInfo(BaseModel):
    device_id: str
    name: str
    surface_kind: str
    reachable: bool = Field(description="Has a live push path right now")
    status_reported_at: int | None = None
    last_seen_at: int | None = Field(default=None, description="Epoch seconds; hour granularity for phones")
    battery_percent: int | None = None
    charging: bool | None = None


class DeviceListing(BaseModel):
    devices: list[DeviceInfo]


MAX_LISTINGS = 1024  # listings made of kept summaries, remembered (the oldest goes first)
_listings: dict[tuple[int, ...], tuple[tuple[DeviceSummary, ...], DeviceListing]] = {}


def device_listing(summaries: Iterable[DeviceSummary]) -> DeviceListing:
    """The tool's view of the core's device summaries. A summary is frozen and a kept read answers
    the very summaries it answered before while nothing changed, so a listing of the same summary
    objects gets the view made of them then (kept with them: their ids cannot be reused meanwhile).
    Nothing changes a view once made; the SDK only reads it."""
    devices = tuple(summaries)
    key = tuple(map(id, devices))
    kept = _listings.get(key)
    if kept is not None:
        return kept[1]
    made = DeviceListing.model_validate({"devices": devices}, from_attributes=True)
    if len(_listings) >= MAX_LISTINGS:
        del _listings[next(iter(_listings))]
    _listings[key] = (devices, made)
    return made


class ReminderSet(BaseModel):
    reminder_id: str = Field(description="Pass it to cancel_reminder")
    fire_at: int = Field(description="Epoch seconds the phone will fire at")
    warnings: list[str] = Field(
        default_factory=list, description="Why delivery to the phone is uncertain; tell the user"
    )


class CancelRequested(BaseModel):
    status: Literal["cancel_requested"] = "cancel_requested"
    warnings: list[str] = Field(
        default_factory=list, description="Why delivery to the phone is uncertain; tell the user"
    )


class Reply(BaseModel):
    status: Literal["pending", "answered", "expired"]
    expires_at: int
    choice_index: int | None = Field(default=None, description="Index into the choices you asked with")
    answered_at: int | None = None
    text: str | None = Field(
        default=None,
        description="What the user typed, if the question allowed it: given once, here, then deleted",
    )
    text_already_read: bool | None = Field(
        default=None, description="True when an earlier result already gave the typed reply (it is gone)"
    )
    callback: CallbackStatus | None = Field(
        default=None, description="With callback_url: whether the POST to it got through yet"
    )


class ApprovalRequested(Reply):
    request_id: str = Field(description="Pass it to check_reply")
    created: bool = Field(description="False when an identical request was already open: no second prompt")
    callback_secret: str | None = Field(
        default=None,
        description="With callback_url: the whsec_ secret the receiving system verifies the POST with",
    )


def reply_fields(out: InteractionOut) -> dict[str, Any]:
    """What a model sees of an interaction's state, the same for request_approval and check_reply."""
    return {
        "status": out.status,
        "expires_at": out.expires_at,
        "choice_index": out.choice_index,
        "answered_at": out.answered_at,
        "text": out.text,
        "text_already_read": out.text_already_read,
        "callback": out.callback,
    }


class RingRequested(BaseModel):
    status: Literal["requested"] = "requested"
    warnings: list[str] = Field(
        default_factory=list, description="Not a failure by itself; says what is uncertain"
    )


class FileSent(BaseModel):
    document_id: str
    byte_length: int
    warnings: list[str] = Field(
        default_factory=list, description="Not a failure by itself; says what is uncertain"
    )


class ReceiptState(BaseModel):
    receipt: str
    status: Literal["pending", "acknowledged", "expired", "cancelled"] = Field(
        description="pending: the phone is still alerting; the others stop it"
    )
    acknowledged_at: int | None = Field(default=None, description="Epoch seconds")
    acknowledged_by: AcknowledgedBy | None = Field(
        default=None, description="The device the user acknowledged on (as GET /v1/receipts/{id} says it)"
    )
    expires_at: int = Field(description="Epoch seconds when the phone stops alerting, unacknowledged")


def receipt_state(out: ReceiptOut) -> ReceiptState:
    """What a model sees of a receipt, the same for check_receipt and cancel_receipt."""
    return ReceiptState(
        receipt=out.receipt,
        status=out.status,
        acknowledged_at=out.acknowledged_at,
        acknowledged_by=out.acknowledged_by,
        expires_at=out.expires_at,
    )
