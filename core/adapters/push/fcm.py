"""FCM push through firebase-admin: one data message per send, to a registration token or an fid.

The sender owns a uniquely named firebase App (never the default one), whose messaging
service keeps an ``httpx.AsyncClient`` bound to the event loop that first used it: build one
``FcmPush`` per event loop and ``aclose()`` it on that loop.
"""

from __future__ import annotations

import functools
import logging
import os
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import anyio
import firebase_admin
import google.auth.transport.requests
import requests
from firebase_admin import credentials, exceptions, messaging

from core.adapters.push.base import FCM, PUSH_DATA_LIMIT, PushMessage, PushOutcome, PushTarget

logger = logging.getLogger(__name__)

_SEND_PATH = "/v1/projects/{0}/messages:send"


class FcmPush:
    """Sends data messages to Android devices through Firebase Cloud Messaging.

    ``service_account`` is the service-account JSON document (a mapping or a path to the file).
    ``fcm_url`` points at an FCM-compatible endpoint instead of Google's: either an origin
    (``http://host:port``, the standard ``/v1/projects/<project>/messages:send`` is appended) or
    the full send URL, where ``{0}`` stands for the project id. ``timeout_s`` bounds each HTTP
    request and the token refresh.
    """

    name = FCM
    registration = None  # a token is registered through its own challenge and proof, not as given
    data_limit = PUSH_DATA_LIMIT

    def __init__(
        self,
        service_account: Mapping[str, Any] | str | os.PathLike[str],
        *,
        app_name: str | None = None,
        fcm_url: str | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        source = dict(service_account) if isinstance(service_account, Mapping) else os.fspath(service_account)
        certificate = credentials.Certificate(source)
        self._app = firebase_admin.initialize_app(
            certificate,
            options={"httpTimeout": timeout_s},
            name=app_name or f"relaybox-fcm-{uuid.uuid4().hex}",
        )
        try:
            # Built now so a bad configuration fails at startup, not on the first push.
            self._service = messaging._get_messaging_service(self._app)
        except Exception:
            firebase_admin.delete_app(self._app)
            raise
        if fcm_url is not None:
            # Private hook (firebase-admin 7.7.0), guarded by a test.
            self._service._fcm_url = _send_url(fcm_url, self._app.project_id)
        self._credential = certificate.get_credential()
        self._timeout_s = timeout_s
        self._refresh_lock = anyio.Lock()
        self._closed = False

    def serves(self, target: PushTarget) -> bool:
        """Devices with an FCM registration (a token or an fid)."""
        return target.registered_with(self.name)

    async def send(self, target: PushTarget, message: PushMessage) -> PushOutcome:
        """Send ``message`` as an FCM data message; never raises for delivery failures."""
        if not self.serves(target) or target.fcm_token is None:
            return PushOutcome.NO_ROUTE
        size = message.encoded_size()
        if size > self.data_limit:
            logger.warning(
                "fcm: message for device %s is %d bytes, over the %d-byte limit; not sent",
                target.device_id,
                size,
                self.data_limit,
            )
            return PushOutcome.FAILED
        try:
            fcm_message = _build_message(target.fcm_token, target.fcm_token_kind, message)
            await self._refresh_access_token()
            batch = await messaging.send_each_async([fcm_message], app=self._app)
        except Exception as exc:  # anything the SDK or its auth layer raises is a failed delivery
            logger.warning("fcm: send to device %s failed: %s", target.device_id, _describe(exc))
            return PushOutcome.FAILED
        response = batch.responses[0]
        if response.success:
            return PushOutcome.SENT
        return _outcome(target.device_id, response.exception)

    async def aclose(self) -> None:
        """Close the SDK's HTTP client on this loop, then delete the App (safe if never used)."""
        if self._closed:
            return
        self._closed = True
        # delete_app() would asyncio.run() this close, which fails inside a running loop.
        await self._service._async_client.aclose()
        await anyio.to_thread.run_sync(firebase_admin.delete_app, self._app)

    async def _refresh_access_token(self) -> None:
        # The SDK refreshes the OAuth token synchronously, on the event loop, when it has expired;
        # doing it here first, on a worker thread, keeps the loop free.
        # One deadline for waiting on the lock and refreshing, so queued sends fail together.
        with anyio.fail_after(self._timeout_s):
            async with self._refresh_lock:
                if self._credential.valid:
                    return
                await anyio.to_thread.run_sync(self._refresh_blocking, abandon_on_cancel=True)

    def _refresh_blocking(self) -> None:
        with requests.Session() as session:
            request = google.auth.transport.requests.Request(session)
            self._credential.refresh(functools.partial(request, timeout=self._timeout_s))


def _send_url(fcm_url: str, project_id: str) -> str:
    if urlsplit(fcm_url).path in ("", "/"):
        return fcm_url.rstrip("/") + _SEND_PATH.format(project_id)
    return fcm_url.replace("{0}", project_id)


def _build_message(registration: str, kind: str, message: PushMessage) -> messaging.Message:
    android = messaging.AndroidConfig(
        priority="high" if message.high_priority else "normal",
        ttl=timedelta(seconds=message.ttl_s),
    )
    if kind == "fid":
        return messaging.Message(data=message.data(), android=android, fid=registration)
    if kind == "token":
        return messaging.Message(data=message.data(), android=android, token=registration)
    raise ValueError(f"unknown FCM registration kind {kind!r}")


def _outcome(device_id: str, error: Exception | None) -> PushOutcome:
    if isinstance(error, messaging.UnregisteredError | messaging.SenderIdMismatchError):
        logger.info("fcm: registration of device %s is gone: %s", device_id, _describe(error))
        return PushOutcome.UNREGISTERED
    if isinstance(error, exceptions.InvalidArgumentError) and "registration token" in str(error).lower():
        logger.info("fcm: registration of device %s is invalid: %s", device_id, _describe(error))
        return PushOutcome.UNREGISTERED
    logger.warning("fcm: send to device %s failed: %s", device_id, _describe(error))
    return PushOutcome.FAILED


def _describe(error: BaseException | None) -> str:
    # Type and error code only: messages can quote the reply body, which may name the registration.
    if isinstance(error, exceptions.FirebaseError):
        return f"{type(error).__name__} ({error.code})"
    return type(error).__name__
