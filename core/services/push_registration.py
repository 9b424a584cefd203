"""A device's push route: how it is registered, proved and forgotten, and what it is now.

A registration with a push service (``push_registrations: {"<service>": {...}}``; web push's also
as ``web_push``) is stored as the device gives it, once the model of the sender configured under
that name has validated it, one row per service. An FCM token becomes the route only once the
phone echoes the nonce of a ``reg_challenge`` pushed to that token. When the push service says a
registration is gone, it is dropped. A device with no route is served over its open stream.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError
from sqlalchemy import delete
from sqlmodel import col

from core.adapters.outbound.reach import web_push_reach
from core.adapters.push.base import FCM, WEB_PUSH, PushMessage, PushTarget, WebPushSubscription
from core.domain.secrets import digest, digests_match, new_prefixed_id
from core.errors import RelayError, invalid_body
from core.principal import Principal
from core.runtime.tx import Tx
from core.services.delivery import push_target, request_push
from core.store.tables import Device, PushRegistration, RegistrationChallenge


class RegistrationProof(BaseModel):
    model_config = ConfigDict(extra="forbid")
    registration_id: str = Field(min_length=1, max_length=64)
    nonce: str = Field(min_length=1, max_length=128)


class PushRegistrations(RootModel[dict[str, dict[str, Any]]]):
    """Registrations with push services, by service name: only services this server pushes
    through, each as its own schema says."""


def checked_registrations(
    tx: Tx, given: PushRegistrations | None, web_push: WebPushSubscription | None
) -> dict[str, dict[str, str]]:
    """What a device registers, by service, each as its configured sender's model validated it:
    400 ``unsupported_push_service`` for a service no configured sender takes a registration for,
    ``invalid_body`` for fields its model refuses. ``web_push`` is web push's registration under
    the field the web app sends; it is kept even with web push off, as it always was. A web-push
    endpoint must be one the server may push to (``web_push_reach``): else 400
    ``push_endpoint_not_allowed``, before anything is stored."""
    checked = {WEB_PUSH: web_push.model_dump()} if web_push is not None else {}
    for service, fields in (given.root if given is not None else {}).items():
        model = tx.push.registrations.get(service)
        if model is None:
            supported = sorted(tx.push.registrations)
            raise RelayError("unsupported_push_service", details={"service": service, "supported": supported})
        try:
            checked[service] = model.model_validate(fields).model_dump()
        except ValidationError as error:
            raise invalid_body(error, at=("push_registrations", service)) from error
    if WEB_PUSH in checked:
        _check_web_push_endpoint(tx, checked[WEB_PUSH]["endpoint"])
    return checked


def _check_web_push_endpoint(tx: Tx, endpoint: str) -> None:
    """400 ``push_endpoint_not_allowed`` for an endpoint that is not https on a push service's
    host, or that names a private address: the server would never send to it."""
    reach = web_push_reach(tx.settings)
    problem = reach.url_problem(endpoint, "the web-push endpoint")
    if problem is not None:
        raise RelayError("push_endpoint_not_allowed", problem, details={"hosts": list(reach.hosts or ())})


def push_route(tx: Tx, device: Device) -> str:
    """The name of the push service the device's pushes go through now (a proved FCM token before
    a web-push subscription, as bootstrap orders the senders), or ``stream``."""
    return tx.push.route(push_target(tx, device))


def apply_push_settings(
    tx: Tx,
    device: Device,
    fcm_token: str | None,
    fcm_kind: str,
    registrations: Mapping[str, Mapping[str, str]],
) -> str | None:
    """Store the device's registrations, by service (one replaces the device's earlier one with
    that service); challenge an FCM token (its registration id, when sent)."""
    for service, fields in registrations.items():
        registration = json.dumps(dict(fields), separators=(",", ":"))
        tx.session.merge(
            PushRegistration(
                device_id=device.device_id, service=service, registration=registration, created_at=tx.now()
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
    if not tx.push.can_reach(candidate):
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


def forget_push_registration(tx: Tx, principal: Principal, *, device_id: str, service: str) -> None:
    """The push service ``service`` said the device's registration is gone: stop using that one
    (system operation); a registration with another service stays."""
    if principal.kind.value != "system":
        raise RelayError("forbidden")
    if service != FCM:
        tx.session.execute(
            delete(PushRegistration).where(
                col(PushRegistration.device_id) == device_id, col(PushRegistration.service) == service
            )
        )
        return
    device = tx.session.get(Device, device_id)
    if device is not None:
        device.fcm_token = None
        device.fcm_token_kind = None
        tx.session.add(device)
