"""The authorization endpoint and its consent page, status and decision.

``GET /oauth/authorize`` validates the request with Authlib (client, exact redirect URI, response
type, scopes, PKCE S256, RFC 8707 resource). An unknown client or an unregistered redirect URI is
shown as an error page in plain words (``consent_page.refusal``), never redirected; every other
error is redirected with ``state`` and ``iss``. A valid request opens a consent session
(``core.services.consent``) and renders the page with its code; a cookie binds the session to this
browser.

``GET /oauth/consent/{id}/status`` long-polls the session. ``POST /oauth/consent/{id}/decision``
spends the confirmed session once and answers with Authlib's redirect: a code for the scopes left
ticked (bound to the account of the phone that confirmed), or ``access_denied``. The request it
completes is the one stored with the session, so a consent cannot be replayed for another client.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl

from authlib.oauth2.base import invalid_error_characters
from authlib.oauth2.rfc6749 import OAuth2Error, UnsupportedResponseTypeError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from core.api.routing import until_disconnected
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.services import consent
from oauth.bridge import (
    Captured,
    FormRequest,
    MalformedRequestError,
    OAuthResponse,
    capture,
    current,
    oauth_error,
    run_authlib,
)
from oauth.client_metadata import ClientMetadataError, is_metadata_document_url, resolve_client
from oauth.consent_page import (
    START_AGAIN,
    ConsentView,
    consent_page,
    error_page,
    refusal,
    response_type_problem,
)
from oauth.grants import Approval
from oauth.server import RelayAuthorizationServer

log = logging.getLogger("relaybox.oauth")
COOKIE = "rb_consent"
MAX_QUERY = 8192
STATUS_WAIT_S = 25


@dataclass(frozen=True)
class Validated:
    client_id: str
    client_name: str
    metadata_document: bool
    redirect_uri: str
    state: str | None
    scopes: list[str]


class ConsentFlow:
    def __init__(self, core: Core, server: RelayAuthorizationServer) -> None:
        self.core = core
        self.server = server
        self.secure_cookie = server.issuer.startswith("https://")

    async def authorize(self, request: Request) -> Response:
        """The authorization endpoint: an error, or the consent page with a fresh code."""
        if len(request.url.query) > MAX_QUERY:
            return error_page(
                400,
                "Request too long",
                f"The authorization request is too long. {START_AGAIN}",
                "invalid_request",
            )
        try:
            captured = await capture(request, self.server.issuer, body="none")
        except MalformedRequestError as exc:
            return error_page(400, "Malformed request", f"{exc.description} {START_AGAIN}", exc.error)
        client_id = next((value for key, value in captured.params if key == "client_id"), "")
        if is_metadata_document_url(client_id):
            try:
                await resolve_client(self.core, client_id, self.server.metadata)
            except ClientMetadataError as exc:
                return error_page(
                    400,
                    "This app could not be identified",
                    f"The app is described at its client_id, but {exc}. {START_AGAIN}",
                    "invalid_client",
                )
        validated: list[Validated] = []
        response = await run_authlib(self.core, lambda: self._validate(captured, validated))
        if not validated:
            return response
        checked = validated[0]
        ip = request.client.host if request.client else "unknown"
        try:
            started = await self.core.run(
                consent.start_consent,
                Principal.anonymous(ip),
                body=consent.ConsentStart(
                    client_id=checked.client_id,
                    client_name=checked.client_name,
                    request_params=request.url.query,
                ),
            )
        except Exception as exc:  # the redirect URI is trusted now: report there, never a 500
            if isinstance(exc, RelayError) and exc.code == "rate_limit_exceeded":
                return self._redirect_error(
                    checked, "temporarily_unavailable", "Too many attempts; try again soon."
                )
            log.exception("starting a consent session failed")
            return self._redirect_error(checked, "server_error", "The server could not start the consent.")
        view = ConsentView(
            session_id=started.session_id,
            code=started.code,
            client_id=checked.client_id,
            client_name=checked.client_name,
            metadata_document=checked.metadata_document,
            redirect_uri=checked.redirect_uri,
            scopes=checked.scopes,
            csrf_token=started.csrf_token,
            ttl_s=self.core.settings.oauth_consent_ttl_s,
        )
        page = consent_page(view)
        page.set_cookie(
            COOKIE,
            started.browser_key,
            max_age=2 * self.core.settings.oauth_consent_ttl_s,
            path=f"/oauth/consent/{started.session_id}",
            secure=self.secure_cookie,
            httponly=True,
            samesite="strict",
        )
        return page

    def _validate(self, captured: Captured, validated: list[Validated]) -> Response:
        request = FormRequest(captured)
        try:
            grant = self.server.get_consent_grant(request, end_user=None)
        except OAuth2Error as error:
            if error.redirect_uri is None and error.error == "invalid_request":
                error.redirect_uri = self._trusted_redirect(request)  # e.g. a repeated scope
            return self._error(error, request.payload.datalist)
        except ValueError:  # Authlib cannot describe a value it refuses (quotes, non-ASCII)
            params = request.payload.datalist
            error_code = _unsayable(params)
            if error_code:
                return self._error(OAuth2Error(error=error_code), params)
            return error_page(
                400,
                "Malformed request",
                f"The authorization request has malformed values. {START_AGAIN}",
                "invalid_request",
            )
        client = grant.client
        validated.append(
            Validated(
                client_id=client.client_id,
                client_name=client.client_name,
                metadata_document=client.source == "cimd",
                redirect_uri=grant.redirect_uri,
                state=grant.request.payload.state,
                scopes=grant.request.scope.split(),
            )
        )
        return Response(status_code=204)

    def _trusted_redirect(self, request: FormRequest) -> str | None:
        """The redirect URI to report an early error to, if client and redirect URI are sound."""
        datalist = request.payload.datalist
        if len(datalist.get("client_id", [])) != 1 or len(datalist.get("redirect_uri", [])) > 1:
            return None
        client = self.server.query_client(request.payload.client_id)
        if client is None:
            return None
        uri = request.payload.redirect_uri
        if uri is None:
            default: str | None = client.get_default_redirect_uri()
            return default
        return uri if client.check_redirect_uri(uri) else None

    async def status(self, request: Request) -> Response:
        """Where the consent stands; waits up to 25 s (``?wait=``) for the phone's confirmation."""
        raw_wait = request.query_params.get("wait", str(STATUS_WAIT_S))
        wait = int(raw_wait) if raw_wait.isascii() and raw_wait.isdigit() and len(raw_wait) < 4 else 0
        ip = request.client.host if request.client else "unknown"
        try:
            state = await until_disconnected(  # a page closed mid-wait ends its wait
                request,
                self.core.run(
                    consent.wait_for_consent,
                    Principal.anonymous(ip),
                    session_id=request.path_params["session_id"],
                    browser_key=request.cookies.get(COOKIE, ""),
                    wait=wait,
                ),
            )
        except RelayError:
            return oauth_error("invalid_request", "No such consent request in this browser.", 404)
        if state is None:
            return Response(status_code=204)  # nobody is left to read it
        return JSONResponse(state.model_dump(exclude_none=True), headers={"Cache-Control": "no-store"})

    async def decide(self, request: Request) -> Response:
        """Allow or Deny: spend the session and answer the client with Authlib's redirect."""
        try:
            posted = await capture(request, self.server.issuer, body="form", limit=4096)
        except MalformedRequestError as exc:
            return error_page(400, "Malformed decision", exc.description)
        fields = FormRequest(posted).payload
        ip = request.client.host if request.client else "unknown"
        session_id = request.path_params["session_id"]
        browser_key = request.cookies.get(COOKIE, "")

        def work() -> Response:
            try:
                decided = consent.take_consent_decision(
                    current().tx,
                    Principal.anonymous(ip),
                    session_id=session_id,
                    browser_key=browser_key,
                    csrf_token=fields.data.get("csrf_token", ""),
                )
            except RelayError as exc:
                return error_page(exc.status, "This consent cannot be answered", exc.message)
            query = decided.request_params
            original = Captured(
                "GET",
                f"{self.server.issuer}/oauth/authorize?{query}",
                posted.headers,
                parse_qsl(query, keep_blank_values=True),
            )
            try:
                grant = self.server.get_consent_grant(FormRequest(original), end_user=None)
            except OAuth2Error as error:
                return self._error(error, FormRequest(original).payload.datalist)
            requested = set(grant.request.scope.split())
            ticked = requested & set(fields.datalist.get("scope", []))
            approval = None
            if (
                fields.data.get("decision") == "allow"
                and ticked
                and grant.client.client_id == decided.client_id
            ):
                approval = Approval(decided.account_id, frozenset(ticked), decided.session_id)
            response: Response = self.server.create_authorization_response(
                grant.request, grant_user=approval, grant=grant
            )
            return response

        return await run_authlib(self.core, work)

    def _error(self, error: OAuth2Error, params: Mapping[str, list[str]]) -> Response:
        """Redirect ``error`` to the client if it has a trusted redirect URI; otherwise a page
        saying what is wrong with the request's ``params`` (never Authlib's description)."""
        if isinstance(error, UnsupportedResponseTypeError):  # Authlib's description is garbled
            response_type = params.get("response_type", [""])[0]
            error = OAuth2Error(
                response_type_problem(response_type),
                state=error.state,
                redirect_uri=error.redirect_uri,
                error=error.error,
            )
        response: OAuthResponse = self.server.handle_error_response(None, error)
        if response.location:
            return self.server.with_issuer(response)
        title, message = refusal(error.error, params)
        return error_page(error.status_code, title, message, error.error)

    def _redirect_error(self, checked: Validated, error: str, description: str) -> Response:
        failure = OAuth2Error(
            description, state=checked.state, redirect_uri=checked.redirect_uri, error=error
        )
        response: OAuthResponse = self.server.handle_error_response(None, failure)
        return self.server.with_issuer(response)


def _unsayable(params: Mapping[str, list[str]]) -> str | None:
    """The RFC 6749 error for the value Authlib would echo in a description but cannot."""
    if invalid_error_characters(params.get("response_type", [""])[0]):
        return "unsupported_response_type"
    if invalid_error_characters(params.get("redirect_uri", [""])[0]):
        return "invalid_request"  # not a registered redirect URI, which Authlib would name
    return None
