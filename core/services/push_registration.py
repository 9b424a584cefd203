"""A device's push route: how it is registered, proved and forgotten, and what it is now.

A web-push subscription is stored as the device gives it. An FCM token becomes the route only once
the phone echoes the nonce of a ``reg_challenge`` pushed to that token. When the push service says a
registration is gone, it is dropped. A device with no route is served over its open stream.
"""

from __future__ import annotations

import secrets
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import delete
from sqlmodel import col

from core.adapters.push.base import PushMessage, PushTarget
from core.domain.secrets import digest, digests_match, new_prefixed_id
from core.errors import RelayError
from core.principal import Principal
from core.runtime.tx import Tx
from core.services.delivery import request_push
from core.store.tables import Device, RegistrationChallenge, WebPushSubscriptionRow

PushRoute = Literal["fcm", "web_push", "stream"]


class WebPushIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    endpoint: str = Field(min_length=8, max_length=2048)
    p256dh: str = Field(min_length=1, max_length=128)
    auth: str = Field(min_length=1, max_length=64)


class RegistrationProof(BaseModel):
    model_config = ConfigDict(extra="forbid")
    registration_id: str = Field(min_length=1, max_length=64)
    nonce: str = Field(min_length=1, max_length=128)


def push_route(tx: Tx, device: Device) -> PushRoute:
    """How the device is pushed now: a proved FCM token first, then a web-push subscription."""
    if device.fcm_token:
        return "fcm"
    if tx.session.get(WebPushSubscriptionRow, device.device_id) is not None:
        return "web_push"
    return "stream"


def apply_push_settings(
    tx: Tx, device: Device, fcm_token: str | None, fcm_kind: str, web_push: WebPushIn | None
) -> str | None:
    """Store a web-push subscription; challenge an FCM token (its registration id, when sent)."""
    if web_push is not None:
        existing = tx.session.get(WebPushSubscriptionRow, device.device_id)
        if existing is not None:
            tx.session.delete(existing)
            tx.session.flush()
        tx.session.add(
            WebPushSubscriptionRow(
                device_id=device.device_id,
                endpoint=web_push.endpoint,
                p256dh=web_push.p256dh,
                auth=web_push.auth,
                created_at=tx.now(),
            )
        )
    if fcm_token is None:
        return None
    return _challenge_fcm_token(tx, device, fcm_token, fcm_kind)


def _challenge_fcm_token(tx: Tx, device: Device, fcm_token: str, fcm_kind: str) -> str | None:
    """An FCM token is used only once the phone echoes the nonce sent to it in a ``reg_challenge``.

    Without FCM configured on this server the token is ignored (``None``): the device is served
    over its open stream, which ``DeviceOut.push`` tells it.
    """
    candidate = PushTarget(device.device_id, fcm_token=fcm_token, fcm_token_kind=fcm_kind)
    if not tx.push_available(candidate):
        return None
    tx.session.execute(
        delete(RegistrationChallenge).where(col(RegistrationChallenge.device_id) == device.device_id)
    )
    registration_id = new_prefixed_id("reg")
    nonce = secrets.token_urlsafe(24)
    tx.session.add(
        RegistrationChallenge(
            registration_id=registration_id,
            device_id=device.device_id,
            nonce_hash=digest(nonce),
            fcm_token=fcm_token,
            fcm_token_kind=fcm_kind,
            expires_at=tx.now() + tx.settings.reg_challenge_ttl_s,
        )
    )
    # The challenge goes to the unproved token itself, never through the device's current route.
    request_push(
        tx,
        candidate,
        PushMessage("reg_challenge", {"registrationId": registration_id, "nonce": nonce}, high_priority=True),
    )
    return registration_id


def prove_push_registration(tx: Tx, device: Device, proof: RegistrationProof) -> None:
    """The phone echoed a ``reg_challenge``: its FCM token becomes the device's push route."""
    challenge = tx.session.get(RegistrationChallenge, proof.registration_id)
    if (
        challenge is None
        or challenge.device_id != device.device_id
        or challenge.expires_at <= tx.now()
        or not digests_match(challenge.nonce_hash, digest(proof.nonce))
    ):
        raise RelayError("invalid_registration")
    device.fcm_token = challenge.fcm_token
    device.fcm_token_kind = challenge.fcm_token_kind
    tx.session.add(device)
    tx.session.delete(challenge)


def forget_push_registration(tx: Tx, principal: Principal, *, device_id: str) -> None:
    """The push service said the registration is gone: stop using it (system operation)."""
    if principal.kind.value != "system":
        raise RelayError("forbidden")
    device = tx.session.get(Device, device_id)
    if device is None:
        return
    device.fcm_token = None
    device.fcm_token_kind = None
    tx.session.add(device)
    tx.session.execute(
        delete(WebPushSubscriptionRow).where(col(WebPushSubscriptionRow.device_id) == device_id)
    )
