"""Connector-grant routes: any device of the account lists them; the phone revokes them."""

from __future__ import annotations

from pydantic import BaseModel

from core.api.routing import Call, Endpoint
from core.services import connector_grants
from core.services.auth import Accept


async def list_connector_grants(call: Call) -> BaseModel:
    return await call.core.run(connector_grants.list_connector_grants, call.principal)


async def revoke_connector_grant(call: Call) -> BaseModel:
    return await call.core.run(
        connector_grants.revoke_connector_grant, call.principal, grant_id=call.path["grant_id"]
    )


ENDPOINTS = [
    Endpoint(
        "GET",
        "/v1/connector-grants",
        list_connector_grants,
        "The account's active connector grants: client, scopes, last use",
        auth=Accept.DEVICE,
        response=connector_grants.ConnectorGrantList,
        tag="connector-grants",
    ),
    Endpoint(
        "DELETE",
        "/v1/connector-grants/{grant_id}",
        revoke_connector_grant,
        "Revoke a connector grant (phone only); its tokens stop working at once",
        auth=Accept.DEVICE,
        response=connector_grants.ConnectorGrantOut,
        errors=("not_found", "not_a_phone"),
        tag="connector-grants",
    ),
]
