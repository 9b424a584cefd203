"""create_app(): THE composition root — one ASGI app serving /v1, /oauth and /mcp."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from connector.logs import RequestIdMiddleware
from connector.mcp_mount import MCP_PATH, mount_mcp
from connector.metrics import Metrics, MetricsMiddleware
from core.api import api_routes
from core.api.errors import http_error_handler, relay_error_handler, render, unexpected_error_handler
from core.bootstrap import build_core
from core.context import Core
from core.errors import RelayError
from core.principal import Principal
from core.services.maintenance import sweep_expired
from core.settings import Settings
from oauth.maintenance import sweep_oauth
from oauth.routes import oauth_routes
from oauth.tokens import verify_access_token

log = logging.getLogger("relaybox")
SWEEP_INTERVAL_S = 60


def create_app(settings: Settings | None = None, *, core: Core | None = None) -> Starlette:
    """Build the app for ``settings`` (read from the environment when omitted). An unusable public
    URL (an http issuer outside loopback) raises ``oauth.metadata.IssuerError`` here, at start-up."""
    if core is None:
        core = build_core(settings or Settings())
    authorization_server = oauth_routes(core)  # first: it refuses an unusable public URL
    mcp = mount_mcp(core, lambda token: verify_access_token(core, token))
    metrics = Metrics(core)
    mcp_route = Route(MCP_PATH, endpoint=mcp.app, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    routes = [
        mcp_route,
        *api_routes(core),
        *authorization_server,
        metrics.route(),
    ]

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with core, mcp.lifespan(), anyio.create_task_group() as tasks:
            tasks.start_soon(_sweep_forever, core)
            yield
            tasks.cancel_scope.cancel()

    app = Starlette(
        routes=routes,
        exception_handlers={
            RelayError: relay_error_handler,
            HTTPException: http_error_handler,
            Exception: unexpected_error_handler,
        },
        lifespan=lifespan,
        middleware=[
            Middleware(RequestIdMiddleware),
            Middleware(MetricsMiddleware, metrics=metrics),
            Middleware(HotRoute, route=mcp_route),
        ],
    )
    app.state.core = core
    app.state.metrics = metrics
    return app


class HotRoute:
    """Serves one route straight from the middleware stack, before the exception layer and the
    router: the connector's ``/mcp`` is called far more often than every other route together, and
    those two layers cost it more than its own gate. The router still holds the route, so any
    other path, or a method the route does not take (405), goes the usual way.

    What the exception layer would do for the route is done here: a ``RelayError`` (the token
    check's 503 when the database is down) is rendered in the spec's shape. Anything else reaches
    the server-error layer outside, which answers 500 ``internal_error``, as for every route."""

    def __init__(self, app: ASGIApp, route: Route) -> None:
        self.app = app
        self.route = route
        self.methods: set[str] = route.methods or set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in self.methods
            or scope["path"] != scope.get("root_path", "") + self.route.path
        ):
            await self.app(scope, receive, send)
            return
        scope["route"] = self.route  # as the router would: the metrics and access log read it
        scope["endpoint"] = self.route.endpoint
        try:
            await self.route.app(scope, receive, send)
        except RelayError as error:
            await render(error)(scope, receive, send)


async def _sweep_forever(core: Core) -> None:
    while True:
        for sweep in (sweep_expired, sweep_oauth):
            try:
                await core.run(sweep, Principal.system())
            except RelayError as error:
                if error.code != "unavailable":  # already logged, once, as a warning
                    log.exception("expiry sweep failed; retrying next interval")
            except Exception:
                log.exception("expiry sweep failed; retrying next interval")
        await anyio.sleep(SWEEP_INTERVAL_S)
