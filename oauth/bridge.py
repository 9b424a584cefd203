"""Authlib's synchronous server under Starlette: capturing a request, and running Authlib in a
core transaction.

A request is captured once (async; the body read with a cap, form or JSON parsed, duplicates
kept), then given to Authlib as an ``OAuth2Request``/``JsonRequest`` whose URI is built from the
configured issuer, never from the Host header. ``run_authlib`` runs Authlib on a worker thread
inside one core transaction; Authlib's model callbacks find it with ``current()``. A response
with status >= 400 rolls the transaction back, so "save the token, then fail" leaves nothing.
Work that must outlive that rollback (revoking a token family after a replay) is queued with
``after()`` and runs in a transaction of its own.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl

from authlib.oauth2.rfc6749 import JsonPayload, JsonRequest, OAuth2Payload, OAuth2Request
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response

from core.api.routing import read_body
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.tx import Tx

MAX_FIELDS = 64
Body = Literal["none", "form", "json"]


class MalformedRequestError(Exception):
    """A request Authlib must not see: answered with an RFC 6749-shaped error."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description
        self.status = status


@dataclass(frozen=True)
class Captured:
    method: str
    uri: str
    headers: Headers
    params: list[tuple[str, str]]  # the query for GET, the form for POST
    json: dict[str, Any] | None = None


async def capture(request: Request, issuer: str, *, body: Body, limit: int = 16 * 1024) -> Captured:
    """Read ``request`` once. ``MalformedRequestError`` for a body that is too large, of the wrong type, not
    UTF-8, not parseable, or with too many fields."""
    query = request.url.query
    uri = issuer + request.url.path + (f"?{query}" if query else "")
    params = _pairs(query)
    document: dict[str, Any] | None = None
    if body != "none":
        raw = await _read(request, limit)
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if body == "form":
            if kind != "application/x-www-form-urlencoded":
                raise MalformedRequestError("invalid_request", "Send the parameters form-encoded.")
            params = _pairs(_text(raw))
        else:
            if kind != "application/json":
                raise MalformedRequestError(
                    "invalid_client_metadata", "Send the client metadata as application/json."
                )
            try:
                parsed = json.loads(raw)
            except ValueError as exc:  # includes bad UTF-8
                raise MalformedRequestError("invalid_client_metadata", "The body is not valid JSON.") from exc
            if not isinstance(parsed, dict):
                raise MalformedRequestError(
                    "invalid_client_metadata", "The client metadata must be a JSON object."
                )
            document = parsed
    return Captured(request.method, uri, request.headers, params, document)


def oauth_error(error: str, description: str, status: int = 400) -> Response:
    body = json.dumps({"error": error, "error_description": description})
    return Response(body, status, headers={"Cache-Control": "no-store"}, media_type="application/json")


async def _read(request: Request, limit: int) -> bytes:
    """The body, read as every ``/v1`` body is (``core.api.routing.read_body``), with its refusals
    in OAuth's shape: a cut body is a plain 400 nobody reads, and nothing is logged."""
    try:
        return await read_body(request, limit)
    except RelayError as exc:
        if exc.code == "body_too_large":
            too_large = f"The body is larger than {limit} bytes."
            raise MalformedRequestError("invalid_request", too_large, 413) from exc
        if exc.code == "body_incomplete":
            raise MalformedRequestError("invalid_request", "The body did not arrive whole.") from exc
        raise MalformedRequestError("invalid_request", "Content-Length is not a number.") from exc


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedRequestError("invalid_request", "The body is not UTF-8.") from exc


def _pairs(text: str) -> list[tuple[str, str]]:
    try:
        return parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FIELDS, errors="strict")
    except ValueError as exc:
        raise MalformedRequestError("invalid_request", "The parameters are malformed or too many.") from exc


class Payload(OAuth2Payload):  # type: ignore[misc]
    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._data: dict[str, str] = {}
        self._datalist: defaultdict[str, list[str]] = defaultdict(list)
        for key, value in pairs:
            self._datalist[key].append(value)
            self._data.setdefault(key, value)

    @property
    def data(self) -> dict[str, str]:
        return self._data

    @property
    def datalist(self) -> defaultdict[str, list[str]]:
        return self._datalist


class FormRequest(OAuth2Request):  # type: ignore[misc]
    """An ``OAuth2Request`` over captured parameters (query for GET, form for POST)."""

    def __init__(self, captured: Captured) -> None:
        super().__init__(method=captured.method, uri=captured.uri, headers=captured.headers)
        self.payload = Payload(captured.params)
        self._params: dict[str, str] = self.payload.data

    @property
    def args(self) -> dict[str, str]:
        return self._params if self.method == "GET" else {}

    @property
    def form(self) -> dict[str, str]:
        return self._params if self.method != "GET" else {}


class JsonBody(JsonPayload):  # type: ignore[misc]
    def __init__(self, document: dict[str, Any]) -> None:
        self._document = document

    @property
    def data(self) -> dict[str, Any]:
        return self._document


class JsonBodyRequest(JsonRequest):  # type: ignore[misc]
    def __init__(self, captured: Captured) -> None:
        super().__init__(captured.method, captured.uri, captured.headers)
        self.payload = JsonBody(captured.json or {})


class OAuthResponse(Response):
    """A Starlette response with the ``location`` attribute RFC 9207's hook reads and writes."""

    @property
    def location(self) -> str | None:
        return self.headers.get("location")

    @location.setter
    def location(self, value: str) -> None:
        self.headers["location"] = value


def authlib_response(status: int, body: object, headers: list[tuple[str, str]]) -> OAuthResponse:
    content = json.dumps(body) if isinstance(body, dict) else str(body or "")
    return OAuthResponse(content, status, headers=dict(headers))


@dataclass
class AuthlibContext:
    tx: Tx
    afterwards: list[Callable[[Tx], None]] = field(default_factory=list)


_CURRENT: ContextVar[AuthlibContext] = ContextVar("relaybox_authlib_context")


def current() -> AuthlibContext:
    """The transaction Authlib's callbacks work in (only inside ``run_authlib``)."""
    return _CURRENT.get()


def after(action: Callable[[Tx], None]) -> None:
    """Run ``action`` in its own transaction once this request's transaction has ended."""
    current().afterwards.append(action)


class _RolledBackError(Exception):
    def __init__(self, response: Response) -> None:
        super().__init__("rolled back")
        self.response = response


def _in_transaction(
    tx: Tx, _principal: Principal, *, work: Callable[[], Response], afterwards: list[Callable[[Tx], None]]
) -> Response:
    token = _CURRENT.set(AuthlibContext(tx, afterwards))
    try:
        response = work()
    finally:
        _CURRENT.reset(token)
    if response.status_code >= 400:
        raise _RolledBackError(response)
    return response


def _afterwards(tx: Tx, _principal: Principal, *, action: Callable[[Tx], None]) -> None:
    action(tx)


async def run_authlib(core: Core, work: Callable[[], Response]) -> Response:
    """Run ``work`` (which calls Authlib) in one transaction; commit unless it answers >= 400."""
    afterwards: list[Callable[[Tx], None]] = []
    try:
        response = await core.run(_in_transaction, Principal.system(), work=work, afterwards=afterwards)
    except _RolledBackError as rolled_back:
        response = rolled_back.response
    for action in afterwards:
        await core.run(_afterwards, Principal.system(), action=action)
    return response
