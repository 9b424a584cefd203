"""Declaring a ``/v1`` route once: its handler, auth, body and response models, and error codes.

The same declaration builds the Starlette route and its OpenAPI operation, so the two cannot
drift. A handler receives a ``Call`` (core, principal, parsed body, path params, client IP) and
returns a pydantic model or a ready Response; it contains no rules of its own.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from core.errors import RelayError, invalid_body
from core.principal import Principal
from core.runtime.core import Core
from core.services.auth import Accept, authenticated, bearer_from_header
from core.services.limits import Limited, limit_headers, settle_ip_peek

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


@dataclass
class Call:
    request: Request
    core: Core
    principal: Principal
    body: BaseModel | None
    path: dict[str, str]
    ip: str
    status: int | None = None  # a handler may choose between documented statuses (201 or 200)

    def body_as(self, model: type[M]) -> M:
        assert isinstance(self.body, model)
        return self.body


Handler = Callable[[Call], Awaitable[BaseModel | Response | None]]


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    handler: Handler
    summary: str
    auth: Accept | None
    body: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    errors: tuple[str, ...] = ()
    tag: str = "relaybox"
    description: str = ""
    # Send class: the per-IP layers are checked before the token lookup, and a request refused with
    # a 4xx settles the IP peek it owes (``core.services.limits.settle_ip_peek``), so that an IP
    # over its budget gets 429 rather than the request's own error. Every 4xx of these routes
    # comes before their send-class charge (which covers the IP layers), or is the charge's own
    # 429; a 5xx may come after it (a failed commit), when the request counts in its IP's layers
    # already, so it stands as it is.
    ip_limited: bool = False
    auth_path_param: str | None = None  # the path parameter that carries the token (capability URL)
    auth_token: Callable[[Request], str] | None = None  # where a compatible API's clients put it
    error_shape: Callable[[RelayError], Response] | None = None  # a compatible API's error body
    body_doc: type[BaseModel] | None = None  # documents a body the handler reads itself (several types)
    error_doc: type[BaseModel] | None = None  # documents the errors of a handler that renders its own
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def operation_id(self) -> str:
        return self.handler.__name__

    def route(self, core: Core) -> Route:
        return Route(self.path, EndpointApp(self, core), methods=[self.method], name=self.operation_id)

    async def serve(self, core: Core, request: Request) -> Response:
        if not self.ip_limited and self.error_shape is None:
            return await self._serve(core, request)
        try:
            try:
                return await self._serve(core, request)
            except RelayError as error:
                if self.ip_limited and error.status < 500:
                    await settle_ip_peek(core)  # raises the IP's 429 in its place, when over budget
                raise
        except RelayError as error:
            if self.error_shape is None:
                raise
            return self.error_shape(error)

    async def _serve(self, core: Core, request: Request) -> Response:
        ip = client_ip(request)
        principal = Principal.anonymous(ip)
        if self.auth is not None:
            if self.auth_token is not None:
                token = self.auth_token(request)
            elif self.auth_path_param:
                token = request.path_params[self.auth_path_param]
            else:
                token = bearer_from_header(request.headers.get("authorization"))
            principal = await authenticated(
                core, principal, token=token, accept=self.auth, limit_ip=self.ip_limited
            )
        body = await read_model(request, self.body, core.settings.max_body_bytes) if self.body else None
        call = Call(request, core, principal, body, dict(request.path_params), ip)
        result = await self.handler(call)
        if isinstance(result, Response):
            return result
        status = call.status or self.status
        if result is None:
            return Response(status_code=status)
        headers = (
            limit_headers(result.rate_limit) if isinstance(result, Limited) and result.rate_limit else None
        )
        # pydantic writes the JSON itself (in Rust): compact UTF-8 JSON, as JSONResponse renders a
        # model_dump(mode="json"), at less than half the cost on the send path; as bytes, so that
        # it is not decoded to text and encoded back (``model_dump_json`` would).
        return Response(
            result.__pydantic_serializer__.to_json(result, exclude_none=True),
            status_code=status,
            headers=headers,
            media_type="application/json",
        )


def routes_by_path(endpoints: list[Endpoint], core: Core) -> list[Route]:
    """One route per path, so that a method no endpoint there takes is 405 with ``Allow`` listing
    every method the path does take (a route per endpoint would list only its own)."""
    grouped: dict[str, list[Endpoint]] = {}
    for endpoint in endpoints:
        grouped.setdefault(endpoint.path, []).append(endpoint)
    routes: list[Route] = []
    for path, group in grouped.items():
        if len(group) == 1:
            routes.append(group[0].route(core))
            continue
        by_method = {endpoint.method: EndpointApp(endpoint, core) for endpoint in group}
        name = "_or_".join(endpoint.operation_id for endpoint in group)
        routes.append(Route(path, MethodDispatch(by_method), methods=list(by_method), name=name))
    return routes


@dataclass(frozen=True, slots=True)
class MethodDispatch:
    """Several endpoints on one path; the route has already refused any other method."""

    by_method: dict[str, EndpointApp]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = "GET" if scope["method"] == "HEAD" else scope["method"]
        await self.by_method[method](scope, receive, send)


@dataclass(frozen=True)
class EndpointApp:
    """An endpoint as a plain ASGI app. Given a function, Starlette would wrap every call in an
    exception-handling layer of its own, which the app's ExceptionMiddleware already is for every
    route; an open ``/v1/sync`` stream holds each layer around it (about 2 KB) for hours."""

    endpoint: Endpoint
    core: Core

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.endpoint.serve(self.core, Request(scope, receive, send))
        await response(scope, receive, send)


def client_ip(request: Request) -> str:
    return request.client.host if request.client else "unknown"


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refused with 413 before it is read whole when it is larger than ``limit``."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise RelayError("invalid_body", "Content-Length is not a number.")
        if int(declared) > limit:
            raise RelayError("body_too_large", details={"max": limit})
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RelayError("body_too_large", details={"max": limit})
            chunks.append(chunk)
    except ClientDisconnect as exc:  # the caller went away mid-body: nothing to answer, nothing to log
        raise RelayError("body_incomplete") from exc
    return b"".join(chunks)


async def read_model(request: Request, model: type[M], limit: int) -> M:
    """Parse a JSON body into ``model``: 415 for another content type, 400 for bad JSON or fields."""
    content_type = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise RelayError("unsupported_content_type")
    raw = await read_body(request, limit)
    return validate_model(model, parse_json(raw or b"{}"))


def parse_json(raw: bytes) -> Any:
    """A JSON body as JSON Schema reads it, where ``5.0`` is the integer 5 (request models take
    integers strictly: ``true`` and ``"5"`` are not). 400 ``invalid_json`` when it does not parse,
    nesting too deep for the decoder included."""
    try:  # as ``json.loads(raw, parse_float=…)``, with one decoder for every body
        return _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise RelayError("invalid_json") from exc


def _json_number(text: str) -> int | float:
    number = float(text)
    return int(number) if number.is_integer() else number


_DECODER = json.JSONDecoder(parse_float=_json_number)


def validate_model(model: type[M], data: Any) -> M:
    if not isinstance(data, dict):
        raise RelayError("invalid_body", "The body must be a JSON object.")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid_body(exc) from exc


async def until_disconnected(request: Request, work: Awaitable[T]) -> T | None:
    """Run ``work``; if the client hangs up first, cancel it and return ``None`` (a waiting poll
    must not outlive its caller). Errors of ``work`` propagate as they are."""
    outcome: list[T] = []
    failure: list[BaseException] = []
    async with anyio.create_task_group() as tasks:

        async def watch() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            tasks.cancel_scope.cancel()

        tasks.start_soon(watch)
        try:
            outcome.append(await work)
        except Exception as error:  # re-raised below, outside the task group, unwrapped
            failure.append(error)
        tasks.cancel_scope.cancel()
    if failure:
        raise failure[0]
    return outcome[0] if outcome else None
