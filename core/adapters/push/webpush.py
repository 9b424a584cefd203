"""Web push through pywebpush: the message's data as an encrypted JSON body, signed with VAPID.

The sender keeps one aiohttp session, created on first use in the running event loop: build
one ``WebPushSender`` per event loop and ``aclose()`` it there.
"""

from __future__ import annotations

import base64
import json
import logging

import aiohttp
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from py_vapid import Vapid, VapidException
from pywebpush import WebPushException, webpush_async

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

_KEY_ERROR = (
    "RELAYBOX_VAPID_PRIVATE_KEY is not a P-256 private key (PEM, or base64url of the raw scalar or DER)"
)


class WebPushSender:
    """Sends push messages to web apps through their browser's push service.

    ``vapid_private_key`` is the application server's P-256 key: PEM text, or base64url of the
    raw 32-byte scalar or of the DER encoding. ``vapid_subject`` is a ``mailto:`` or ``https:``
    URL where the push service can reach the operator. ``timeout_s`` bounds each push.
    """

    name = WEB_PUSH
    registration = WebPushSubscription
    data_limit = WEB_PUSH_DATA_LIMIT

    def __init__(self, vapid_private_key: str, vapid_subject: str, *, timeout_s: float = 10.0) -> None:
        self._vapid = _load_vapid_key(vapid_private_key)
        try:
            # Signs once to check the subject the way every push will.
            self._vapid.sign({"sub": vapid_subject, "aud": "https://push.invalid"})
        except VapidException as exc:
            raise ValueError("RELAYBOX_VAPID_SUBJECT must be a mailto: or https: URL") from exc
        self._subject = vapid_subject
        self._timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None
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
        try:
            await webpush_async(
                {
                    "endpoint": subscription["endpoint"],
                    "keys": {"p256dh": subscription["p256dh"], "auth": subscription["auth"]},
                },
                data=json.dumps(message.data(), separators=(",", ":")),
                vapid_private_key=self._vapid,
                vapid_claims={"sub": self._subject},  # fresh per call: pywebpush writes aud and exp into it
                ttl=message.ttl_s,
                headers={"Urgency": "high" if message.high_priority else "normal"},
                timeout=self._timeout_s,
                aiohttp_session=self._get_session(),
            )
        except WebPushException as exc:
            status = exc.status_code
            if status in _GONE:
                logger.info("webpush: subscription of device %s is gone (%s)", target.device_id, status)
                return PushOutcome.UNREGISTERED
            logger.warning("webpush: push to device %s failed (status %s)", target.device_id, status)
            return PushOutcome.FAILED
        except Exception as exc:  # network errors, timeouts, a malformed subscription
            # Type only: the message of a network error can name the endpoint.
            logger.warning("webpush: push to device %s failed: %s", target.device_id, type(exc).__name__)
            return PushOutcome.FAILED
        return PushOutcome.SENT

    async def aclose(self) -> None:
        """Close the HTTP session (safe if never used, and twice)."""
        self._closed = True
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout_s))
        return self._session


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
