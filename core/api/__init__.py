"""The ``/v1`` REST API: every route declared once as an Endpoint."""

from __future__ import annotations

from starlette.routing import BaseRoute, Route

from core.api import devices, health, pairing, pushover, relay, send, tokens
from core.api.health import openapi_response
from core.api.openapi import build_openapi
from core.api.routing import Endpoint
from core.context import Core

ENDPOINTS: list[Endpoint] = [
    *health.ENDPOINTS,
    *devices.ENDPOINTS,
    *pairing.ENDPOINTS,
    *tokens.ENDPOINTS,
    *relay.ENDPOINTS,
    *send.ENDPOINTS,
    *pushover.ENDPOINTS,
]


def api_routes(core: Core) -> list[BaseRoute]:
    """The Starlette routes of the REST API plus ``/openapi.json``."""
    document = build_openapi(ENDPOINTS, server_url=core.settings.base_url)
    routes: list[BaseRoute] = [endpoint.route(core) for endpoint in ENDPOINTS]
    routes.append(
        Route("/openapi.json", openapi_response(document), methods=["GET"], include_in_schema=False)
    )
    return routes
