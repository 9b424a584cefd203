"""A fake FCM v1 endpoint and OAuth token endpoint, for running firebase-admin offline.

Usage from a fixture::

    with FakeFcm() as fcm:
        push = FcmPush(make_service_account(fcm.origin), fcm_url=fcm.origin, timeout_s=1)
        ...
        fcm.fail("stale-token", UNREGISTERED)   # scripted error for one registration
        fcm.stall("slow-token")                 # no reply until the fake stops
        fcm.received                            # every message body that arrived, in order

Error replies use Google's error envelope with the ``FcmError`` detail, which is what
firebase-admin parses into its typed exceptions.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from tests.fakes.local_http import LocalHttpServer, Reply, Request

FAKE_ACCESS_TOKEN = "fake-access-token"
JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_TOKEN_STALL_LIMIT_S = 10.0
_SEND_PATH = re.compile(r"^/v1/projects/(?P<project>[^/]+)/messages:send$")


@dataclass(frozen=True, slots=True)
class FcmErrorReply:
    """One scripted FCM error: HTTP status, google.rpc status name, FcmError code, message."""

    http_status: int
    status: str
    error_code: str | None
    message: str

    def envelope(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.http_status, "status": self.status, "message": self.message}
        if self.error_code is not None:
            error["details"] = [
                {"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": self.error_code}
            ]
        return {"error": error}


UNREGISTERED = FcmErrorReply(404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found.")
SENDER_ID_MISMATCH = FcmErrorReply(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", "SenderId mismatch")
INVALID_REGISTRATION_TOKEN = FcmErrorReply(
    400,
    "INVALID_ARGUMENT",
    "INVALID_ARGUMENT",
    "The registration token is not a valid FCM registration token",
)
INVALID_PAYLOAD = FcmErrorReply(
    400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "Invalid value at 'message.data[0].value' (TYPE_STRING)"
)
QUOTA_EXCEEDED = FcmErrorReply(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded.")
THIRD_PARTY_AUTH_ERROR = FcmErrorReply(401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", "APNs auth failed.")
INTERNAL = FcmErrorReply(500, "INTERNAL", "INTERNAL", "Internal error encountered.")
UNAVAILABLE = FcmErrorReply(503, "UNAVAILABLE", "UNAVAILABLE", "The service is currently unavailable.")


@dataclass(frozen=True, slots=True)
class FcmRequest:
    """One request that reached ``messages:send``."""

    project: str
    body: dict[str, Any]
    authorization: str | None

    @property
    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = self.body["message"]
        return message

    @property
    def registration(self) -> str | None:
        target = self.message.get("token", self.message.get("fid"))
        return None if target is None else str(target)


class FakeFcm(LocalHttpServer):
    """The far end for ``FcmPush``: token endpoint at ``/token``, FCM under ``/v1/projects``."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._received: list[FcmRequest] = []
        self._errors: dict[str, FcmErrorReply] = {}
        self._stalled: set[str] = set()
        self._token_requests = 0
        self._token_endpoint_open = threading.Event()
        self._token_endpoint_open.set()
        self.token_requested = threading.Event()

    @property
    def token_uri(self) -> str:
        return f"{self.origin}/token"

    @property
    def received(self) -> list[FcmRequest]:
        """Every ``messages:send`` request so far, failed attempts and retries included."""
        with self._lock:
            return list(self._received)

    @property
    def token_requests(self) -> int:
        with self._lock:
            return self._token_requests

    def fail(self, registration: str, error: FcmErrorReply) -> None:
        """Answer every message for ``registration`` (a token or an fid) with ``error``."""
        with self._lock:
            self._errors[registration] = error

    def stall(self, registration: str) -> None:
        """Hold replies for ``registration`` until the fake stops (the sender should time out)."""
        with self._lock:
            self._stalled.add(registration)

    def stall_token_endpoint(self) -> None:
        """Hold token replies until ``release_token_endpoint()``, the fake stops, or 10 s pass."""
        self._token_endpoint_open.clear()

    def release_token_endpoint(self) -> None:
        self._token_endpoint_open.set()

    def stop(self) -> None:
        self._token_endpoint_open.set()
        super().stop()

    def handle(self, request: Request) -> Reply | None:
        if request.method == "POST" and request.path == "/token":
            return self._token(request)
        match = _SEND_PATH.match(request.path)
        if request.method == "POST" and match:
            return self._send(match["project"], request)
        return Reply.json(404, {"error": {"code": 404, "status": "NOT_FOUND", "message": "no such path"}})

    def _token(self, request: Request) -> Reply | None:
        form = parse_qs(request.body.decode())
        with self._lock:
            self._token_requests += 1
        self.token_requested.set()
        # Bounded: a client that waits for this reply on its own event loop fails, not hangs.
        if not self._token_endpoint_open.wait(_TOKEN_STALL_LIMIT_S):
            return None
        if form.get("grant_type") != [JWT_BEARER_GRANT] or not form.get("assertion"):
            return Reply.json(400, {"error": "invalid_grant"})
        return Reply.json(
            200, {"access_token": FAKE_ACCESS_TOKEN, "expires_in": 3600, "token_type": "Bearer"}
        )

    def _send(self, project: str, request: Request) -> Reply | None:
        received = FcmRequest(project, request.json(), request.header("Authorization"))
        registration = received.registration or ""
        with self._lock:
            self._received.append(received)
            number = len(self._received)
            error = self._errors.get(registration)
            stall = registration in self._stalled
        if stall:
            self.hold_until_stopped()
            return None
        if error is not None:
            return Reply.json(error.http_status, error.envelope())
        return Reply.json(200, {"name": f"projects/{project}/messages/{number}"})


def make_service_account(fake_origin: str, project_id: str = "relaybox-test") -> dict[str, str]:
    """A service-account document whose ``token_uri`` is the fake's (one RSA key per process)."""
    return {
        "type": "service_account",
        "project_id": project_id,
        "private_key_id": "fake-key-1",
        "private_key": _private_key_pem(),
        "client_email": f"push@{project_id}.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": f"{fake_origin}/token",
    }


@functools.cache
def _private_key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
