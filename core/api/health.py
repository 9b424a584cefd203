"""Liveness and the OpenAPI document."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from core.api.routing import Call, Endpoint


class Health(BaseModel):
    status: str
    version: str


async def healthz(_call: Call) -> BaseModel:
    return Health(status="ok", version="1.1.0")


def openapi_response(document: dict[str, object]) -> Callable[[Request], Awaitable[Response]]:
    async def openapi(_request: Request) -> Response:
        return JSONResponse(document)

    return openapi


ENDPOINTS = [
    Endpoint(
        "GET", "/healthz", healthz, "Liveness: the process answers", auth=None, response=Health, tag="health"
    ),
]
