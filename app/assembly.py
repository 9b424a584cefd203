"""create_app(): THE composition root — one ASGI app serving /v1, /oauth, /mcp and the web pages."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from app.logs import RequestIdMiddleware, add_header, route_template, start_request_id
from app.metrics import Metrics, MetricsMiddleware
from connector.cors import CrossOrigin, request_origin
from connector.mcp_mount import MCP_PATH, mount_mcp
from core.api import api_routes
from core.api.errors import (
    http_error_handler,
    relay_error_handler,
    render,
    unexpected_error_handler,
    unexpected_error_response,
)
from core.bootstrap import build_core
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.tx import Tx
from core.services import wake_ups
from core.services.maintenance import sweep_expired
from core.settings import Settings
from oauth.maintenance import sweep_oauth
from oauth.routes import oauth_routes
from oauth.tokens import verify_access_token
from webapp.routes import web_routes

log = logging.getLogger("relaybox")
SWEEP_INTERVAL_S = 60
WAKE_INTERVAL_S = 1  # how late a scheduled wake-up (a web phone's reminder) may leave


def create_app(settings: Settings | None = None, *, core: Core | None = None) -> RelayboxApp:
    """Build the app for ``settings`` (read from the environment when omitted). An unusable public
    URL (an http issuer outside loopback) raises ``oauth.metadata.IssuerError`` here, at start-up."""
    if core is None:
        core = build_core(settings or Settings())
    authorization_server = oauth_routes(core)  # first: it refuses an unusable public URL
    mcp = mount_mcp(core, lambda token: verify_access_token(core, token))
    metrics = Metrics(core)
    mcp_route = Route(MCP_PATH, endpoint=mcp.app, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    cross_origin = {MCP_PATH: mcp.cross_origin}
    routes = [
        mcp_route,
        *api_routes(core),
        *authorization_server,
        metrics.route(),
        *web_routes(),  # last: the landing page, /docs, /static/ and the web app under /app/
    ]

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with core, mcp.lifespan(), anyio.create_task_group() as tasks:
            tasks.start_soon(_sweep_forever, core)
            tasks.start_soon(_wake_forever, core)
            yield
            tasks.cancel_scope.cancel()

    app = RelayboxApp(
        routes=routes,
        exception_handlers={
            RelayError: relay_error_handler,
            HTTPException: http_error_handler,
            Exception: unexpected_error_handler,
        },
        lifespan=lifespan,
        middleware=[Middleware(RequestIdMiddleware), Middleware(MetricsMiddleware, metrics=metrics)],
        hot_route=mcp_route,
        metrics=metrics,
        cross_origin=cross_origin,
    )
    app.state.core = core
    app.state.metrics = metrics
    return app


class RelayboxApp(Starlette):
    """The one ASGI app. Requests for its hot route, ``/mcp`` (called far more often than every
    other route together), skip Starlette's error layer, the request-id and metrics middlewares,
    the exception layer and the router, which together cost it more than its own auth gate:
    ``_serve_hot`` does what they would in one frame (request id, metrics and the access log's
    route template, a ``RelayError`` in the spec's shape, 500 ``internal_error`` for anything
    else). The router still holds the route, so any other path, and a method the route does not
    take (405), goes the usual way.

    ``cross_origin`` maps a path to the browsers it admits (``connector.cors``): their preflights
    are answered here and their responses, by whichever way they were served, name the origin."""

    def __init__(
        self, *, hot_route: Route, metrics: Metrics, cross_origin: dict[str, CrossOrigin], **options: Any
    ) -> None:
        super().__init__(**options)
        self.hot_route = hot_route
        self.hot_methods = hot_route.methods or set()
        self.metrics = metrics
        self.cross_origin = cross_origin

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (policy := self.cross_origin.get(scope["path"])) is not None:
            origin = request_origin(scope)
            if origin is not None:
                if scope["method"] == "OPTIONS":
                    await policy.preflight(origin, scope, receive, send)
                    return
                send = policy.exposing(origin, send)
        if (
            scope["type"] == "http"
            and scope["method"] in self.hot_methods
            and scope["path"] == scope.get("root_path", "") + self.hot_route.path
        ):
            await self._serve_hot(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    async def _serve_hot(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.hot_route
        scope["app"], scope["route"], scope["endpoint"] = self, route, route.endpoint  # as routed
        started = time.perf_counter()
        echoed = start_request_id(scope)
        status: int | None = None

        async def send_served(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                route_template.set(route.path)
                add_header(message, echoed)
            await send(message)

        try:
            await route.app(scope, receive, send_served)
        except RelayError as error:  # the token check's 503 when the database is down
            await render(error)(scope, receive, send_served)
        except Exception as error:
            if status is not None:
                raise  # the response has begun: the server cuts the connection and logs it
            await unexpected_error_response(error)(scope, receive, send_served)
        finally:
            if status is not None:  # else the caller left before any response: nothing was served
                self.metrics.observe(route.path, scope["method"], status, time.perf_counter() - started)


async def _sweep_forever(core: Core) -> None:
    async def sweep(operation: Callable[[Tx, Principal], object]) -> None:
        await core.run(operation, Principal.system())

    for_each = (sweep_expired, sweep_oauth)
    await _every(SWEEP_INTERVAL_S, "expiry sweep", *(partial(sweep, operation) for operation in for_each))


async def _wake_forever(core: Core) -> None:
    await _every(WAKE_INTERVAL_S, "scheduled wake-ups", partial(wake_ups.deliver_due, core))


async def _every(interval_s: float, what: str, *steps: Callable[[], Awaitable[object]]) -> None:
    """Run each step, then sleep, for ever; a failure is logged (a dependency that is down was
    logged already, once, as a warning) and the next round tries again."""
    while True:
        for step in steps:
            try:
                await step()
            except RelayError as error:
                if error.code != "unavailable":
                    log.exception("%s failed; retrying next interval", what)
            except Exception:
                log.exception("%s failed; retrying next interval", what)
        await anyio.sleep(interval_s)
