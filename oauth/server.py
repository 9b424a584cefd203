"""The authorization server: Authlib's ``AuthorizationServer`` wired to relaybox.

Public clients only; authorization code with PKCE S256 and RFC 8707 resource indicators; rotating
refresh tokens; RFC 7009 revocation; RFC 7591 registration; RFC 9207 ``iss`` on every
authorization response. Its model callbacks run inside ``oauth.bridge.run_authlib``.
"""

from __future__ import annotations

from typing import Any

from authlib.oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import InvalidScopeError, JsonRequest, OAuth2Request
from authlib.oauth2.rfc9207 import IssuerParameter

from core.principal import CONNECTOR_SCOPES
from core.settings import Settings
from oauth import scopes, tokens
from oauth.bridge import OAuthResponse, authlib_response, current
from oauth.grants import CodeGrant, Revocation, RotatingRefreshGrant, S256CodeChallenge
from oauth.metadata import authorization_server_metadata
from oauth.registration import DynamicRegistration, find_client
from oauth.resource_indicators import ResourceIndicator, mcp_resource
from oauth.tables import OAuthClient


class Issuer(IssuerParameter):  # type: ignore[misc]
    """RFC 9207: ``iss`` on every redirect ``create_authorization_response`` makes."""

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer

    def get_issuer(self) -> str:
        return self.issuer


class RelayAuthorizationServer(AuthorizationServer):  # type: ignore[misc]
    def __init__(self, settings: Settings, issuer: str) -> None:
        super().__init__(scopes_supported=list(CONNECTOR_SCOPES))
        self.issuer = issuer
        self.resource = mcp_resource(issuer)
        self.metadata = authorization_server_metadata(issuer)
        self.issuer_parameter = Issuer(issuer)
        self.register_token_generator("default", tokens.token_generator(settings))
        self.register_grant(CodeGrant, [S256CodeChallenge(required=True), ResourceIndicator(self.resource)])
        self.register_grant(RotatingRefreshGrant)
        self.register_endpoint(Revocation)
        self.register_endpoint(DynamicRegistration(self.metadata))
        self.register_extension(self.issuer_parameter)

    def query_client(self, client_id: str) -> OAuthClient | None:
        return find_client(current().tx, client_id)

    def save_token(self, token: dict[str, Any], request: Any) -> None:
        tokens.save_token(current(), token, request)

    def create_oauth2_request(self, request: Any) -> OAuth2Request:
        if not isinstance(request, OAuth2Request):
            raise TypeError("pass an oauth.bridge.FormRequest")
        return request

    def create_json_request(self, request: Any) -> JsonRequest:
        if not isinstance(request, JsonRequest):
            raise TypeError("pass an oauth.bridge.JsonBodyRequest")
        return request

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        return None  # Authlib's base raises NotImplementedError on every token request

    def handle_response(self, status: int, body: Any, headers: list[tuple[str, str]]) -> OAuthResponse:
        return authlib_response(status, body, headers)

    def validate_requested_scope(self, scope: str | None) -> None:
        if scopes.unknown(scope):
            raise InvalidScopeError()

    def with_issuer(self, response: OAuthResponse) -> OAuthResponse:
        """Add ``iss`` to a redirect made outside ``create_authorization_response`` (RFC 9207)."""
        self.issuer_parameter.add_issuer_parameter(self, response)
        return response
