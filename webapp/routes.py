"""The browser-facing routes: the landing page at ``/``, the readable API docs at ``/docs``, shared
files under ``/static/`` (styles, scripts, the wire modules and the vendored cryptography under
``/static/vendor/``) and the installable web app under ``/app/`` (scope of its service worker).

The pages reach the core only through the ``/v1`` routes any device uses. An unknown file under
``/static/`` raises the app's 404 (JSON, like any unknown path: assets are not pages); an unknown
path under ``/app/`` gets the readable HTML not-found page, since a person is looking at it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from webapp.assets import PACKAGE, WORKER_SECURITY_HEADERS, Asset, read_asset, read_folder, read_vendor

Endpoint = Callable[[Request], Awaitable[Response]]
APP_INDEX = "index.html"
SERVICE_WORKER = "sw.js"  # served with its own policy (webapp.assets.WORKER_CONTENT_SECURITY_POLICY)


def web_routes(package: Path = PACKAGE) -> list[BaseRoute]:
    """The routes, with every file read now (a missing or unservable file fails here, at start-up)."""
    pages = package / "pages"
    static = read_folder(package / "static")
    static |= {f"vendor/{path}": asset for path, asset in read_vendor(package / "vendor").items()}
    app = read_folder(package / "app")
    app[SERVICE_WORKER] = dataclasses.replace(app[SERVICE_WORKER], security=WORKER_SECURITY_HEADERS)
    not_found = read_asset(pages / "not-found.html")

    async def static_file(request: Request) -> Response:
        asset = static.get(request.path_params["path"])
        if asset is None:
            raise HTTPException(status_code=404)
        return asset.respond(request)

    async def app_file(request: Request) -> Response:
        asset = app.get(request.path_params["path"] or APP_INDEX)
        if asset is None:
            return not_found.respond(request, status_code=404)
        return asset.respond(request)

    return [
        _get("/", _page(read_asset(pages / "index.html"))),
        _get("/docs", _page(read_asset(pages / "docs.html"))),
        _get("/static/{path:path}", static_file),
        _get("/app/{path:path}", app_file),
    ]


def _get(path: str, endpoint: Endpoint) -> Route:
    """A page or file: GET (and HEAD) only, and not part of the REST API's OpenAPI document."""
    return Route(path, endpoint, methods=["GET"], include_in_schema=False)


def _page(asset: Asset) -> Endpoint:
    async def page(request: Request) -> Response:
        return asset.respond(request)

    return page
