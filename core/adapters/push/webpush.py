"""Web push: the message's data as an encrypted JSON body (aes128gcm, RFC 8291, pywebpush's
encoder), signed with VAPID (RFC 8292), POSTed to the subscription's endpoint through the outbound
policy (``core.adapters.outbound``): https, a push service's host only, every resolved address
checked and the connection pinned to it, no redirects, bounded time.

The sender keeps its connections to each push service for the next push: build one
``WebPushSender`` per event loop and ``aclose()`` it there.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Mapping
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from py_vapid import Vapid, VapidException
from pywebpush import WebPusher

from core.adapters.outbound.client import OutboundClient, OutboundError
from core.adapters.push.base import (
    WEB_PUSH,
    WEB_PUSH_DATA_LIMIT,
    PushMessage,
    PushOutcome,
    PushTarget,
    WebPushSubscription,
)

logger = logging.getLogger(__name__)

_GONE = frozenset({404, 410})
VAPID_LIFETIME_S = 12 * 3600  # the JWT's exp, from each push (RFC 8292 allows at most 24 h)
ANSWER_LIMIT = 16 * 1024  # a push service's answer is a status and a short body at most
USER_AGENT = "relaybox-webpush/1"

_KEY_ERROR = (
    "RELAYBOX_VAPID_PRIVATE_KEY is not a P-256 private key (PEM, or base64url of the raw scalar or DER)"
)


class WebPushSender:
    """Sends push messages to web apps through their browser's push service.

    ``vapid_private_key`` is the application server's P-256 key: PEM text, or base64url of the
    raw 32-byte scalar or of the DER encoding. ``vapid_subject`` is a ``mailto:`` or ``https:``
    URL where the push service can reach the operator. ``outbound`` makes each push under web
    push's reach (``bootstrap``: the push services' hosts) and bounds its time.
    """

    name = WEB_PUSH
    registration = WebPushSubscription
    data_limit = WEB_PUSH_DATA_LIMIT

    def __init__(self, vapid_private_key: str, vapid_subject: str, *, outbound: OutboundClient) -> None:
        self._vapid = _load_vapid_key(vapid_private_key)
        try:
            # Signs once to check the subject the way every push will.
            self._vapid.sign({"sub": vapid_subject, "aud": "https://push.invalid"})
        except VapidException as exc:
            raise ValueError("RELAYBOX_VAPID_SUBJECT must be a mailto: or https: URL") from exc
        self._subject = vapid_subject
        self._outbound = outbound
        self._closed = False

    @property
    def application_server_key(self) -> str:
        """The public key browsers subscribe with (``applicationServerKey``), base64url."""
        point = self._vapid.public_key.public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
        return base64.urlsafe_b64encode(point).rstrip(b"=").decode()

    def serves(self, target: PushTarget) -> bool:
        """Devices with a web-push subscription."""
        return target.registered_with(self.name)

    async def send(self, target: PushTarget, message: PushMessage) -> PushOutcome:
        """Send ``message`` to the device's subscription; never raises for delivery failures."""
        subscription = target.registrations.get(self.name)
        if subscription is None:
            return PushOutcome.NO_ROUTE
        if self._closed:
            logger.warning("webpush: sender is closed; message for device %s not sent", target.device_id)
            return PushOutcome.FAILED
        size = message.encoded_size()
        if size > self.data_limit:
            logger.warning(
                "webpush: message for device %s is %d bytes, over the %d-byte limit; not sent",
                target.device_id,
                size,
                self.data_limit,
            )
            return PushOutcome.FAILED
        endpoint = subscription["endpoint"]
        if self._outbound.reach.url_problem(endpoint, "endpoint") is not None:
            # Kept from before the rule (registration refuses it now): it can never be sent to.
            logger.warning("webpush: endpoint of device %s is not allowed; dropped", target.device_id)
            return PushOutcome.UNREGISTERED
        try:
            body = self._body(subscription, message)
        except Exception as exc:  # keys that are not a P-256 point and an auth secret
            logger.warning(
                "webpush: subscription of device %s is malformed: %s", target.device_id, type(exc).__name__
            )
            return PushOutcome.FAILED
        try:
            answer = await self._outbound.request(
                "POST",
                endpoint,
                headers=self._headers(endpoint, message),
                content=body,
                read_limit=ANSWER_LIMIT,
            )
        except OutboundError as refused:
            logger.warning("webpush: push to device %s failed: %s", target.device_id, refused.code)
            return PushOutcome.FAILED
        if answer.status in _GONE:
            logger.info("webpush: subscription of device %s is gone (%s)", target.device_id, answer.status)
            return PushOutcome.UNREGISTERED
        if not 200 <= answer.status < 300:  # a 3xx too: redirects are not followed
            logger.warning("webpush: push to device %s failed (status %s)", target.device_id, answer.status)
            return PushOutcome.FAILED
        return PushOutcome.SENT

    def _headers(self, endpoint: str, message: PushMessage) -> dict[str, str]:
        parts = urlsplit(endpoint)
        claims = {
            "sub": self._subject,
            "aud": f"{parts.scheme}://{parts.netloc}",
            "exp": int(time.time()) + VAPID_LIFETIME_S,
        }
        return {
            **self._vapid.sign(claims),
            "TTL": str(message.ttl_s),
            "Urgency": "high" if message.high_priority else "normal",
            "Content-Encoding": "aes128gcm",
            "Content-Type": "application/octet-stream",
        }

    @staticmethod
    def _body(subscription: Mapping[str, str], message: PushMessage) -> bytes:
        keys = {"p256dh": subscription["p256dh"], "auth": subscription["auth"]}
        pusher = WebPusher({"endpoint": subscription["endpoint"], "keys": keys})
        data = json.dumps(message.data(), separators=(",", ":")).encode()
        body: bytes = pusher.encode(data, "aes128gcm")["body"]
        return body

    async def aclose(self) -> None:
        """Close the kept connections (safe if never used, and twice)."""
        self._closed = True
        await self._outbound.aclose()


def _load_vapid_key(key: str) -> Vapid:
    try:
        vapid = (
            Vapid.from_pem(key.strip().encode()) if "-----BEGIN" in key else Vapid.from_string(key.strip())
        )
    except (ValueError, TypeError) as exc:
        raise ValueError(_KEY_ERROR) from exc
    private_key = vapid.private_key
    if not (
        isinstance(private_key, ec.EllipticCurvePrivateKey) and isinstance(private_key.curve, ec.SECP256R1)
    ):
        raise ValueError(_KEY_ERROR)
    return vapid
