"""A fake web-push service (RFC 8030) that checks VAPID (RFC 8292) and decrypts (RFC 8291).

Usage from a fixture::

    with FakeWebPushService() as service:
        subscriber = service.subscribe()          # a browser's subscription on this fake
        await sender.send(web_push_target(subscriber.subscription), message)
        service.received                          # decrypted payload, TTL, Urgency, VAPID claims
        service.answer(subscriber.push_id, 410)   # scripted status for one subscription
        service.stall(subscriber.push_id)         # no reply until the fake stops

A push whose VAPID token or encryption is wrong is refused (401 or 400) and the reason is
kept in ``rejections``, so a test can show exactly what the fake disliked.

The fake serves https on 127.0.0.1 with a certificate from the test run's CA: a server pushes to
it only under the settings ``push_reach_settings`` names (its address added to web push's hosts,
private addresses allowed, that CA trusted), never under the defaults.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat
from pydantic import SecretStr

from core.adapters.outbound.client import OutboundClient
from core.adapters.push.base import WEB_PUSH, PushTarget, WebPushSubscription
from core.bootstrap import web_push_outbound
from core.settings import explicit_settings
from tests.fakes.local_http import LocalHttpServer, Reply, Request
from tests.fakes.tls import ca_file

_PUSH_PREFIX = "/push/"
_MAX_VAPID_LIFETIME_S = 24 * 60 * 60  # RFC 8292 section 2
MAX_BODY = 4096  # what push services accept (RFC 8030 section 7.2 asks for at least this)


def push_reach_settings() -> dict[str, Any]:
    """The settings that let a server push to the fakes: explicit, for tests only."""
    return {"web_push_hosts": ["127.0.0.1"], "web_push_allow_private": True, "web_push_ca_file": ca_file()}


def push_reach_env() -> dict[str, str]:
    """``push_reach_settings`` as a ``relaybox serve`` reads them from its environment."""
    return {
        "RELAYBOX_WEB_PUSH_HOSTS": json.dumps(["127.0.0.1"]),
        "RELAYBOX_WEB_PUSH_ALLOW_PRIVATE": "true",
        "RELAYBOX_WEB_PUSH_CA_FILE": str(ca_file()),
    }


def fake_push_outbound(timeout_s: float) -> OutboundClient:
    """Web push's outbound client as bootstrap builds it, under ``push_reach_settings``."""
    return web_push_outbound(explicit_settings(**push_reach_settings(), push_timeout_s=timeout_s))


def web_push_target(subscription: WebPushSubscription, device_id: str = "d1") -> PushTarget:
    """A device registered with web push by ``subscription``, as the core reads it."""
    return PushTarget(device_id, registrations={WEB_PUSH: subscription.model_dump()})


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class Subscriber:
    """What the browser holds: the subscription it hands out, and the keys to read pushes."""

    push_id: str
    subscription: WebPushSubscription
    private_key: ec.EllipticCurvePrivateKey
    auth_secret: bytes
    application_server_key: str | None


@dataclass(frozen=True, slots=True)
class ReceivedPush:
    """One accepted push: decrypted payload, headers of interest and the verified VAPID claims."""

    push_id: str
    payload: bytes
    ttl: str | None
    urgency: str | None
    claims: dict[str, Any]
    vapid_key: str

    def json(self) -> Any:
        return json.loads(self.payload)


class VapidRejectedError(Exception):
    """The push's VAPID authorization is missing or wrong."""


class FakeWebPushService(LocalHttpServer):
    """Accepts ``POST /push/<id>`` for the subscriptions it handed out."""

    def __init__(self) -> None:
        super().__init__(tls=True)
        self._lock = threading.Lock()
        self._subscribers: dict[str, Subscriber] = {}
        self._answers: dict[str, Reply] = {}
        self._stalled: set[str] = set()
        self._received: list[ReceivedPush] = []
        self._rejections: list[str] = []

    @property
    def received(self) -> list[ReceivedPush]:
        with self._lock:
            return list(self._received)

    @property
    def rejections(self) -> list[str]:
        with self._lock:
            return list(self._rejections)

    def subscribe(self, application_server_key: str | None = None) -> Subscriber:
        """A new subscription (P-256 key pair and 16-byte auth secret) on this service.

        With ``application_server_key`` the service also insists that pushes are signed by it,
        as real push services do for subscriptions made with that key.
        """
        private_key = ec.generate_private_key(ec.SECP256R1())
        public_point = private_key.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
        auth_secret = secrets.token_bytes(16)
        push_id = secrets.token_urlsafe(12)
        subscription = WebPushSubscription(
            endpoint=f"{self.origin}{_PUSH_PREFIX}{push_id}",
            p256dh=b64url_encode(public_point),
            auth=b64url_encode(auth_secret),
        )
        subscriber = Subscriber(push_id, subscription, private_key, auth_secret, application_server_key)
        with self._lock:
            self._subscribers[push_id] = subscriber
        return subscriber

    def answer(self, push_id: str, status: int, location: str | None = None) -> None:
        """Answer every push for ``push_id`` with ``status`` (404, 410, 429, 500, a 307 to
        ``location``, ...)."""
        with self._lock:
            self._answers[push_id] = Reply(status, headers={"Location": location} if location else None)

    def stall(self, push_id: str) -> None:
        """Hold replies for ``push_id`` until the fake stops (the sender should time out)."""
        with self._lock:
            self._stalled.add(push_id)

    def handle(self, request: Request) -> Reply | None:
        if request.method != "POST" or not request.path.startswith(_PUSH_PREFIX):
            return Reply(404)
        push_id = request.path.removeprefix(_PUSH_PREFIX)
        with self._lock:
            subscriber = self._subscribers.get(push_id)
            status = self._answers.get(push_id)  # a scripted reply
            stall = push_id in self._stalled
        if stall:
            self.hold_until_stopped()
            return None
        if status is not None:
            return status
        if subscriber is None:
            return Reply(404)
        try:
            origin = f"{self.scheme}://{request.header('Host')}"  # the name it was reached by
            claims, vapid_key = self._verify_vapid(request.header("Authorization"), subscriber, origin)
        except VapidRejectedError as exc:
            return self._reject(401, f"vapid: {exc}")
        if len(request.body) > MAX_BODY:
            return self._reject(413, f"body of {len(request.body)} bytes")
        if request.header("Content-Encoding") != "aes128gcm":
            return self._reject(400, f"content-encoding: {request.header('Content-Encoding')}")
        try:
            payload = http_ece.decrypt(
                request.body,
                private_key=subscriber.private_key,
                auth_secret=subscriber.auth_secret,
                version="aes128gcm",
            )
        except Exception as exc:  # any decryption failure is the sender's fault here
            return self._reject(400, f"decrypt: {type(exc).__name__}: {exc}")
        received = ReceivedPush(
            push_id, payload, request.header("TTL"), request.header("Urgency"), claims, vapid_key
        )
        with self._lock:
            self._received.append(received)
            number = len(self._received)
        return Reply(201, headers={"Location": f"{self.origin}/message/{number}"})

    def _reject(self, status: int, reason: str) -> Reply:
        with self._lock:
            self._rejections.append(reason)
        return Reply(status)

    def _verify_vapid(
        self, authorization: str | None, subscriber: Subscriber, origin: str
    ) -> tuple[dict[str, Any], str]:
        scheme, _, params = (authorization or "").partition(" ")
        if scheme.lower() != "vapid":
            raise VapidRejectedError(f"scheme {scheme!r}")
        fields = dict(part.strip().split("=", 1) for part in params.split(",") if "=" in part)
        token, key = fields.get("t"), fields.get("k")
        if not token or not key:
            raise VapidRejectedError("t or k missing")
        if subscriber.application_server_key is not None and key != subscriber.application_server_key:
            raise VapidRejectedError("k is not the subscription's application server key")
        claims = _verify_es256_jwt(token, key)
        now = time.time()
        if claims.get("aud") != origin:
            raise VapidRejectedError(f"aud {claims.get('aud')!r} is not {origin!r}")
        exp = claims.get("exp")
        if not isinstance(exp, int) or not now < exp <= now + _MAX_VAPID_LIFETIME_S:
            raise VapidRejectedError(f"exp {exp!r} is not within the next 24 hours")
        if not claims.get("sub"):
            raise VapidRejectedError("sub missing")
        return claims, key


def _verify_es256_jwt(token: str, key: str) -> dict[str, Any]:
    try:
        header_b64, claims_b64, signature_b64 = token.split(".")
        header = json.loads(b64url_decode(header_b64))
        claims = json.loads(b64url_decode(claims_b64))
        signature = b64url_decode(signature_b64)
        public_key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b64url_decode(key))
    except ValueError as exc:
        raise VapidRejectedError(f"malformed token or key: {exc}") from exc
    if header.get("alg") != "ES256" or len(signature) != 64:
        raise VapidRejectedError(f"not an ES256 JWT: {header}")
    r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
    try:
        public_key.verify(
            encode_dss_signature(r, s), f"{header_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256())
        )
    except InvalidSignature as exc:
        raise VapidRejectedError("bad signature") from exc
    if not isinstance(claims, dict):
        raise VapidRejectedError("claims are not an object")
    return claims


def new_vapid_private_key() -> SecretStr:
    """A fresh P-256 application server key in PEM, as ``RELAYBOX_VAPID_PRIVATE_KEY`` takes it."""
    key = ec.generate_private_key(ec.SECP256R1())
    return SecretStr(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode())
