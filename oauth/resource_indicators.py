"""RFC 8707 resource indicators, which Authlib lacks. The one resource is ``<issuer>/mcp``.

An authorization request must name it exactly once (a trailing slash is tolerated), else
``invalid_target``, redirected with ``state`` and ``iss``. It is bound into the code and every
token. A token or refresh request may name it again and must then name the same resource.
"""

from __future__ import annotations

from typing import Any

from authlib.oauth2.rfc6749 import OAuth2Error


class InvalidTargetError(OAuth2Error):  # type: ignore[misc]
    error = "invalid_target"
    description = "The resource parameter must name this server's MCP endpoint, once."


def mcp_resource(issuer: str) -> str:
    return f"{issuer}/mcp"


def names(resource: str, value: str) -> bool:
    return value in (resource, resource + "/")


def requested_resources(request: Any) -> list[str]:
    values: list[str] = list(request.payload.datalist.get("resource", []))
    return values


class ResourceIndicator:
    """Authorization-code grant extension: requires the resource at authorize, checks it at token."""

    def __init__(self, resource: str) -> None:
        self.resource = resource

    def __call__(self, grant: Any) -> None:
        grant.register_hook("after_validate_authorization_request_payload", self.check_authorization_request)
        grant.register_hook("after_validate_token_request", self.check_token_request)

    def check_authorization_request(self, grant: Any, _result: object) -> None:
        values = requested_resources(grant.request)
        if len(values) != 1 or not names(self.resource, values[0]):
            raise InvalidTargetError()
        grant.request.resource = self.resource

    def check_token_request(self, grant: Any, _result: object) -> None:
        check_token_resource(grant.request, grant.request.authorization_code.resource)


def check_token_resource(request: Any, bound: str) -> None:
    """A token request may repeat the resource; it must then be the one the credential is bound to."""
    values = requested_resources(request)
    if len(values) > 1 or (values and not names(bound, values[0])):
        raise InvalidTargetError()
