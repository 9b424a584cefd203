"""The ``/v1`` REST API: every route declared once as an Endpoint."""

from __future__ import annotations

from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

from core.api import (
    attachments,
    devices,
    embedded_objects,
    gotify,
    grants,
    health,
    ntfy,
    pairing,
    phone,
    pushover,
    pushover_receipts,
    receipts,
    relay,
    send,
    tokens,
    transfers,
    webpush,
)
from core.api.errors import PLAIN_NOT_FOUND
from core.api.health import openapi_response
from core.api.openapi import build_openapi
from core.api.routing import Endpoint, routes_by_path
from core.runtime.core import Core
from core.settings import Settings

BASE_ENDPOINTS: list[Endpoint] = [
    *health.ENDPOINTS,
    *devices.ENDPOINTS,
    *pairing.ENDPOINTS,
    *tokens.ENDPOINTS,
    *grants.ENDPOINTS,
    *relay.ENDPOINTS,
    *send.ENDPOINTS,
    *pushover.ENDPOINTS,
    *pushover_receipts.ENDPOINTS,  # before receipts: /v1/receipts/{id}.json would match {id}
    *receipts.ENDPOINTS,
    *attachments.ENDPOINTS,
    *transfers.ENDPOINTS,
    *webpush.ENDPOINTS,
]


# Other services' APIs, served at the server's root in their own shapes (``docs/compat-*.md``), last
# of every route (ntfy's ``/{topic}`` takes any path no other route does) and outside /openapi.json.
COMPAT_ENDPOINTS: list[Endpoint] = [*gotify.ENDPOINTS, *ntfy.ENDPOINTS]


def endpoints(settings: Settings) -> list[Endpoint]:
    """Every route the settings turn on (documents only when enabled: otherwise ``api_routes``
    answers a plain 404 there; the object routes only for the embedded store)."""
    return [*BASE_ENDPOINTS, *phone.endpoints(settings), *embedded_objects.object_endpoints(settings)]


def api_routes(core: Core) -> list[BaseRoute]:
    """The Starlette routes of the REST API plus ``/openapi.json``."""
    listed = endpoints(core.settings)
    document = build_openapi(listed, server_url=core.settings.base_url)
    devices.document_push_registrations(document, core.push.registrations)
    routes: list[BaseRoute] = [*routes_by_path(listed, core)]
    routes.append(
        Route("/openapi.json", openapi_response(document), methods=["GET"], include_in_schema=False)
    )
    # Every method: a plain 404, unlike an unknown path's JSON (the specification's "not yet enabled").
    routes.append(Route(phone.DOCUMENTS_PATH, PLAIN_NOT_FOUND, include_in_schema=False))
    return routes


def compat_routes(core: Core) -> list[BaseRoute]:
    """The routes of ``COMPAT_ENDPOINTS``, for the end of the app's route list; each takes its own
    methods only, so that another method on a path nothing else serves stays a 404."""
    ntfy.register_topic_convertor()
    return [
        OwnMethodsRoute(
            route.path, route.app, methods=route.methods, name=route.name, include_in_schema=False
        )
        for route in routes_by_path(COMPAT_ENDPOINTS, core)
    ]


class OwnMethodsRoute(Route):
    """A route that is not a match at all for a method it does not take (Starlette's would be a
    partial match, and the router's answer a 405): ntfy's ``/{topic}`` takes every one-segment
    path, and an unknown path must stay a 404 to every method but ntfy's."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        return (Match.NONE, {}) if match is Match.PARTIAL else (match, child)
