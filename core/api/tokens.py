"""Sender-token routes, from the phone (create, revoke) and any device of the account (list)."""

from __future__ import annotations

from pydantic import BaseModel

from core.api.routing import Call, Endpoint
from core.services import tokens
from core.services.auth import Accept


async def create_token(call: Call) -> BaseModel:
    return await call.core.run(
        tokens.create_sender_token, call.principal, body=call.body_as(tokens.TokenCreate)
    )


async def list_tokens(call: Call) -> BaseModel:
    return await call.core.run(tokens.list_sender_tokens, call.principal)


async def revoke_token(call: Call) -> BaseModel:
    return await call.core.run(tokens.revoke_sender_token, call.principal, token_id=call.path["token_id"])


ENDPOINTS = [
    Endpoint(
        "POST",
        "/v1/tokens",
        create_token,
        "Mint a sender token (phone only; plaintext shown once)",
        auth=Accept.DEVICE,
        body=tokens.TokenCreate,
        response=tokens.TokenCreated,
        status=201,
        errors=("invalid_scope", "invalid_priority", "not_a_phone", "limit_reached"),
        tag="tokens",
    ),
    Endpoint(
        "GET",
        "/v1/tokens",
        list_tokens,
        "The account's active sender tokens (never plaintext)",
        auth=Accept.DEVICE,
        response=tokens.TokenList,
        tag="tokens",
    ),
    Endpoint(
        "DELETE",
        "/v1/tokens/{token_id}",
        revoke_token,
        "Revoke a sender token (phone only)",
        auth=Accept.DEVICE,
        response=tokens.TokenOut,
        errors=("not_found", "not_a_phone"),
        tag="tokens",
    ),
]
