"""Pairing routes: the computer's init and result, the phone's confirm."""

from __future__ import annotations

from pydantic import BaseModel

from core.api.routing import Call, Endpoint
from core.services import pairing
from core.services.auth import Accept


async def pair_init(call: Call) -> BaseModel:
    return await call.core.run(pairing.init_pairing, call.principal, body=call.body_as(pairing.PairInit))


async def pair_confirm(call: Call) -> BaseModel:
    body = call.body_as(pairing.PairConfirm)
    return await call.core.run(pairing.confirm_pairing, call.principal, body=body, ip=call.ip)


async def pair_result(call: Call) -> BaseModel:
    return await call.core.run(pairing.get_pairing_result, call.principal)


ENDPOINTS = [
    Endpoint(
        "POST",
        "/v1/pair/init",
        pair_init,
        "A computer registers its key and receives a six-digit code",
        auth=None,
        body=pairing.PairInit,
        response=pairing.PairInitOut,
        status=201,
        errors=("invalid_public_key", "rate_limit_exceeded"),
        tag="pairing",
    ),
    Endpoint(
        "POST",
        "/v1/pair/confirm",
        pair_confirm,
        "The phone confirms a code with its public key",
        auth=Accept.DEVICE,
        body=pairing.PairConfirm,
        response=pairing.PairConfirmOut,
        errors=("invalid_code", "invalid_public_key", "too_many_attempts", "not_a_phone"),
        tag="pairing",
    ),
    Endpoint(
        "GET",
        "/v1/pair/result",
        pair_result,
        "The computer collects the phone's key once confirmed",
        auth=Accept.DEVICE | Accept.PENDING_DEVICE,
        response=pairing.PairResultOut,
        errors=("pairing_expired",),
        tag="pairing",
    ),
]
