"""The authorization server's routes, for ``app.assembly.create_app``.

``/.well-known/oauth-authorization-server`` and ``/.well-known/oauth-protected-resource[/mcp]``
(discovery), ``/oauth/authorize`` with its consent page, ``/oauth/token``, ``/oauth/revoke`` and
``/oauth/register``. These answer in RFC 6749's shape (``{"error", "error_description"}``), never
the ``/v1`` one; an unexpected failure is a logged ``server_error`` with a request id. The
endpoints a browser-based client calls with ``fetch`` (discovery, token, revoke, register) allow
any origin: they take no cookies.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route, Router

from core.api.errors import PLAIN_NOT_FOUND
from core.api.request_ids import new_request_id, request_id
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.services.devices import charge_ip
from oauth.authorize import ConsentFlow
from oauth.bridge import (
    FormRequest,
    JsonBodyRequest,
    MalformedRequestError,
    capture,
    current,
    oauth_error,
    run_authlib,
)
from oauth.consent_page import error_page
from oauth.metadata import CORS_HEADERS, discovery_routes, issuer_of
from oauth.server import RelayAuthorizationServer

log = logging.getLogger("relaybox.oauth")
Endpoint = Callable[[Request], Awaitable[Response]]
PUBLIC_METHODS = ["GET", "POST", "OPTIONS"]  # GET only to answer 405 in RFC 6749's shape


def oauth_routes(core: Core) -> list[BaseRoute]:
    """Every route of the authorization server. Raises ``IssuerError`` for an unusable public URL."""
    issuer = issuer_of(core.settings)
    server = RelayAuthorizationServer(core.settings, issuer)
    flow = ConsentFlow(core, server)
    endpoints = TokenEndpoints(core, server)
    return [
        # An unknown discovery document is a plain 404 (clients probe several), not the JSON one.
        Mount("/.well-known", app=Router(discovery_routes(issuer), default=PLAIN_NOT_FOUND)),
        Mount(
            "/oauth",
            routes=[
                Route("/authorize", guarded(flow.authorize, page=True), methods=["GET"]),
                Route("/consent/{session_id}/status", guarded(flow.status), methods=["GET"]),
                Route("/consent/{session_id}/decision", guarded(flow.decide, page=True), methods=["POST"]),
                Route("/token", public(guarded(endpoints.token)), methods=PUBLIC_METHODS),
                Route("/revoke", public(guarded(endpoints.revoke)), methods=PUBLIC_METHODS),
                Route("/register", public(guarded(endpoints.register)), methods=PUBLIC_METHODS),
            ],
        ),
    ]


class TokenEndpoints:
    def __init__(self, core: Core, server: RelayAuthorizationServer) -> None:
        self.core = core
        self.server = server

    async def token(self, request: Request) -> Response:
        """RFC 6749 §3.2: the code and refresh grants, for public clients."""
        captured = await capture(request, self.server.issuer, body="form")
        repeated = {key for key, _ in captured.params if sum(1 for k, _ in captured.params if k == key) > 1}
        if repeated:
            raise MalformedRequestError("invalid_request", f"Repeated parameter: {sorted(repeated)[0]}.")
        if not dict(captured.params).get("grant_type"):
            raise MalformedRequestError("invalid_request", "Missing grant_type.")
        return await run_authlib(self.core, lambda: self.server.create_token_response(FormRequest(captured)))

    async def revoke(self, request: Request) -> Response:
        """RFC 7009 revocation."""
        captured = await capture(request, self.server.issuer, body="form")
        return await run_authlib(
            self.core, lambda: self.server.create_endpoint_response("revocation", FormRequest(captured))
        )

    async def register(self, request: Request) -> Response:
        """RFC 7591 dynamic registration of a public client; per-IP limited."""
        ip = request.client.host if request.client else "unknown"
        captured = await capture(request, self.server.issuer, body="json")

        def work() -> Response:
            try:
                charge_ip(
                    current().tx,
                    Principal.anonymous(ip),
                    "oauth_register_ip_minute",
                    self.core.settings.oauth_register_per_ip_per_minute,
                )
            except RelayError as exc:
                limited = oauth_error(
                    "temporarily_unavailable", "Too many registrations; try again soon.", 429
                )
                limited.headers.update(exc.headers)
                return limited
            response: Response = self.server.create_endpoint_response(
                "client_registration", JsonBodyRequest(captured)
            )
            return response

        return await run_authlib(self.core, work)


def guarded(endpoint: Endpoint, *, page: bool = False) -> Endpoint:
    """Malformed input is a 400, a dependency outage a 503, an unexpected failure a logged 500; never
    a traceback or the /v1 error shape."""

    async def serve(request: Request) -> Response:
        try:
            return await endpoint(request)
        except MalformedRequestError as exc:
            return oauth_error(exc.error, exc.description, exc.status)
        except Exception as exc:
            if isinstance(exc, RelayError) and exc.code == "unavailable":  # already logged
                if page:
                    return error_page(503, "Briefly unavailable", "Please try again in a moment.")
                unavailable = oauth_error("temporarily_unavailable", exc.message, 503)
                unavailable.headers.update(exc.headers)
                return unavailable
            rid = request_id.get() or new_request_id()  # the one the response header echoes
            log.exception("oauth endpoint failed (request id %s)", rid)
            if page:
                return error_page(500, "Something went wrong", f"Please try again (request id {rid}).")
            return oauth_error("server_error", f"Something went wrong (request id {rid}).", 500)

    return serve


def public(endpoint: Endpoint) -> Endpoint:
    """Allow cross-origin calls from browser-based clients (no cookies are involved)."""

    async def serve(request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=CORS_HEADERS)
        if request.method != "POST":
            refused = oauth_error("invalid_request", "Use POST.", 405)
            refused.headers.update({**CORS_HEADERS, "Allow": "POST, OPTIONS"})
            return refused
        response = await endpoint(request)
        response.headers.update(CORS_HEADERS)
        return response

    return serve
