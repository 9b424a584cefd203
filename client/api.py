"""The HTTP transport under the client's API classes (``DeviceApi``, ``PhoneApi``, ``TransferApi``).

Every request has a timeout. Errors of either server shape (``{"error": {"code", "message"}}`` and
the flat ``{"error": "invalid_token"}``) and transport failures become ``ApiError``. Device
credentials travel only in the ``Authorization`` header; they are never logged, printed or put
into an exception or a ``repr``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import httpx

from client.lifecycle import Closing
from client.state import ClientError

DEFAULT_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 5.0
USER_AGENT = "relaybox-client/0.1"

_FLAT_MESSAGES = {
    "missing_token": "the request carried no device credential",
    "invalid_token": "the server did not accept this device's credential (was the device removed?)",
}


class ApiError(ClientError):
    """The server answered with an error, or could not be reached (``status`` 0)."""

    def __init__(
        self, status: int, code: str, message: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(code, message)
        self.status = status
        self.details: dict[str, Any] = dict(details or {})


def normalise_server(url: str) -> str:
    """Check that ``url`` is an http(s) origin (optionally with a path) and drop a trailing slash."""
    text = url.strip().rstrip("/")
    try:
        parsed = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise ClientError("invalid_server", f"{url!r} is not a URL") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ClientError("invalid_server", f"{url!r} is not an http:// or https:// URL")
    if parsed.query or parsed.fragment or parsed.userinfo:
        raise ClientError("invalid_server", f"{url!r} must not carry credentials, a query or a fragment")
    return text


class RelayboxApi(Closing):
    """Calls to a relaybox server over one ``httpx.Client``; subclasses add the routes. Use as a
    context manager, or call ``close()``."""

    def __init__(
        self,
        server: str,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.server = normalise_server(server)
        self._token = token
        self._http = httpx.Client(
            base_url=self.server,
            timeout=httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT_S)),
            transport=transport,
            headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"RelayboxApi({self.server!r}, token={'set' if self._token else 'none'})"

    def close(self) -> None:
        self._http.close()

    # Transport.

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        auth: bool = True,
        expect: int = 200,
    ) -> Any:
        response = self._request(method, path, body=body, auth=auth, expect=expect)
        if response.status_code == 204:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise ApiError(
                response.status_code, "invalid_response", "the server answered without JSON"
            ) from exc

    def _request(
        self, method: str, path: str, *, body: Mapping[str, Any] | None, auth: bool, expect: int
    ) -> httpx.Response:
        """The response with status ``expect``; any other becomes an ``ApiError``."""
        headers: dict[str, str] = {}
        if auth:
            if not self._token:
                raise ClientError("missing_token", "this device has no credential; register or pair it first")
            headers["Authorization"] = f"Bearer {self._token}"
        try:
            response = self._http.request(method, path, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise ApiError(0, "timeout", f"{self.server} did not answer in time") from exc
        except httpx.HTTPError as exc:
            raise ApiError(0, "connection_failed", f"cannot reach {self.server}: {exc}") from exc
        if response.status_code != expect:
            raise error_from_response(response)
        return response


def error_from_response(response: httpx.Response) -> ApiError:
    """Read either error shape; anything else becomes ``http_<status>`` with the reason phrase."""
    status = response.status_code
    code = f"http_{status}"
    message = response.reason_phrase or "request failed"
    details: Mapping[str, Any] | None = None
    try:
        body: object = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            code = _string_or(error.get("code"), code)
            message = _string_or(error.get("message"), message)
            raw_details = error.get("details")
            details = cast(Mapping[str, Any], raw_details) if isinstance(raw_details, dict) else None
        elif isinstance(error, str) and error:
            code = error
            message = _string_or(body.get("message"), _FLAT_MESSAGES.get(error, message))
    return ApiError(status, code, message, details)


def _string_or(value: object, fallback: str) -> str:
    return value if isinstance(value, str) and value else fallback


def without_none(**fields: object) -> dict[str, Any]:
    """The optional parts of a request body: the given fields whose value is not None, in order."""
    return {key: value for key, value in fields.items() if value is not None}
