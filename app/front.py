"""``RelayboxApp``, the one ASGI app, and its one request path.

Every HTTP request passes ``RelayboxApp.__call__`` once, in one frame: the preflight and response
headers for browsers a path admits (``connector.cors``), the request id (``app.logs``),
``X-Content-Type-Options: nosniff`` on every response (no browser reads an error, a download or an
object the store serves as anything but its declared type), the metrics
and the access log's route template (``app.metrics``), and errors in the spec's shape
(``core.api.errors``: a ``RelayError``, Starlette's 404/405, 503 for a dependency that is down, 500
``internal_error`` for anything else). Then the request goes to its route: a route whose path has no
parameters is found by a dictionary lookup (``/mcp``, ``/v1/send``, … — the hot paths), any other
through Starlette's router, as is a method a route does not take (405 with ``Allow``).

This replaces Starlette's middleware stack (its error layer, two middlewares and the exception
layer) for HTTP; lifespan events still take Starlette's way."""

from __future__ import annotations

import time
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.logs import add_header, route_template, start_request_id
from app.metrics import Metrics, template
from connector.cors import CrossOrigin, request_origin
from core.api.errors import http_error_handler, render, unexpected_error_response
from core.errors import RelayError


class RelayboxApp(Starlette):
    """``cross_origin`` maps a path to the browsers it admits: their preflights are answered here
    and their responses name the origin."""

    def __init__(self, *, metrics: Metrics, cross_origin: dict[str, CrossOrigin], **options: Any) -> None:
        super().__init__(**options)
        self.metrics = metrics
        self.cross_origin = cross_origin
        self.static_routes = static_routes(self.router.routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        if (policy := self.cross_origin.get(scope["path"])) is not None:
            origin = request_origin(scope)
            if origin is not None:
                if scope["method"] == "OPTIONS":
                    await policy.preflight(origin, scope, receive, _nosniff(send))
                    return
                send = policy.exposing(origin, send)
        target: ASGIApp = self.router
        known: str | None = None
        root = scope.get("root_path", "")
        route = self.static_routes.get(scope["path"][len(root) :] if root else scope["path"])
        if route is not None and route.methods is not None and scope["method"] in route.methods:
            scope["route"], scope["endpoint"] = route, route.endpoint  # as the router would
            target, known = route.app, route.path  # its endpoint routes no further
        await self._serve(target, scope, receive, send, known)

    async def _serve(
        self, target: ASGIApp, scope: Scope, receive: Receive, send: Send, known: str | None
    ) -> None:
        """Serve ``target``; ``known`` is the route template when routing is already over (a
        static route), else it is read from the scope once the response starts."""
        started = time.perf_counter()
        root = scope.get("root_path", "")
        echoed = start_request_id(scope)
        status: int | None = None
        route = ""  # the route's template, once the response starts: routing is over by then

        async def send_served(message: Message) -> None:
            nonlocal status, route
            if message["type"] == "http.response.start":
                status = message["status"]
                route = known or template(scope, root)
                route_template.set(route)
                add_header(message, echoed)
                add_nosniff(message)
            await send(message)

        try:
            await target(scope, receive, send_served)
        except Exception as error:
            if status is not None:
                raise  # the response has begun: the server cuts the connection and logs it
            response = await _error_response(error, scope)
            await response(scope, receive, send_served)
        finally:
            if status is not None:  # else the caller left before any response: nothing was served
                elapsed = time.perf_counter() - started
                self.metrics.observe(route, scope["method"], status, elapsed)


NOSNIFF = (b"x-content-type-options", b"nosniff")


def add_nosniff(start: Message) -> None:
    """``X-Content-Type-Options: nosniff`` on an ``http.response.start`` message, unless the
    response set it itself (the pages and the consent page do)."""
    headers = start.get("headers", ())
    for name, _ in headers:  # a plain loop: a generator costs more, on every request
        if name.lower() == NOSNIFF[0]:
            return
    start["headers"] = [*headers, NOSNIFF]


def _nosniff(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            add_nosniff(message)
        await send(message)

    return sending


async def _error_response(error: Exception, scope: Scope) -> Response:
    if isinstance(error, RelayError):
        return render(error)
    if isinstance(error, HTTPException):
        return await http_error_handler(Request(scope), error)
    return unexpected_error_response(error)


def static_routes(routes: list[BaseRoute]) -> dict[str, Route]:
    """The routes whose path has no parameters, by path — each only when no route before it in
    the router's order would take that path for any of its methods, so that the lookup finds what
    the router would."""
    found: dict[str, Route] = {}
    for index, route in enumerate(routes):
        if not isinstance(route, Route) or route.param_convertors or route.path in found:
            continue
        earlier = routes[:index]
        probes = [{"type": "http", "path": route.path, "method": m} for m in (route.methods or ())]
        if not any(other.matches(probe)[0] is Match.FULL for other in earlier for probe in probes):
            found[route.path] = route
    return found
