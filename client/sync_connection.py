"""One streaming ``GET /v1/sync`` response: a 200 of ``text/event-stream``, or the error its status
means (a 401 after a good connection: the credential was revoked; 429 and 5xx: try again later)."""

from __future__ import annotations

import httpx

from client.api import ApiError, error_from_response
from client.state import ClientError


class ServerBusyError(Exception):
    """The server answered 429 or 5xx: worth another try later."""


class OpenStream:
    """A streaming response that is 200; other statuses become errors (401 ends the follower)."""

    def __init__(self, http: httpx.Client, request: httpx.Request, *, revoked: bool) -> None:
        self._http = http
        self._request = request
        self._revoked = revoked
        self._response: httpx.Response | None = None

    def __enter__(self) -> httpx.Response:
        response = self._http.send(self._request, stream=True)
        if response.status_code == 200:
            self._response = response
            kind = response.headers.get("content-type", "")
            if kind.partition(";")[0].strip().lower() != "text/event-stream":
                response.close()
                raise ApiError(200, "invalid_response", f"the server answered {kind or 'untyped data'}")
            return response
        try:
            response.read()
        finally:
            response.close()
        error = error_from_response(response)
        if response.status_code == 401 and self._revoked:
            raise ClientError(
                "credential_revoked",
                "the server no longer accepts this device's credential: it was disconnected or "
                "removed; pair it again",
            )
        if response.status_code == 429 or response.status_code >= 500:
            raise ServerBusyError(f"HTTP {response.status_code} {error.code}")
        raise error

    def __exit__(self, *exc_info: object) -> None:
        if self._response is not None:
            self._response.close()
