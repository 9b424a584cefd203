"""create_app(): THE composition root — one ASGI app serving /v1, /oauth, /mcp and the web pages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from starlette.applications import Starlette
from starlette.routing import Route

import oauth.tables  # noqa: F401  (the authorization server's tables, on the shared metadata)
from app.background import callbacks_forever, sweep_forever, wake_forever
from app.front import RelayboxApp
from app.metrics import Metrics
from connector.mcp_mount import MCP_PATH, mount_mcp
from core.api import api_routes, compat_routes
from core.bootstrap import build_core
from core.runtime.core import Core
from core.settings import Settings
from oauth.routes import oauth_routes
from oauth.tokens import verify_access_token
from webapp.routes import web_routes


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
        *web_routes(),  # the landing page, /docs, /static/ and the web app under /app/
        *compat_routes(core),  # last: ntfy's /{topic} takes any path nothing else serves
    ]

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with core, mcp.lifespan(), anyio.create_task_group() as tasks:
            tasks.start_soon(sweep_forever, core)
            tasks.start_soon(wake_forever, core)
            tasks.start_soon(callbacks_forever, core)
            yield
            tasks.cancel_scope.cancel()

    app = RelayboxApp(routes=routes, lifespan=lifespan, metrics=metrics, cross_origin=cross_origin)
    app.state.core = core
    app.state.metrics = metrics
    return app
