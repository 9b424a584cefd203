"""Liveness, readiness and the OpenAPI document."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Literal

import anyio
from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from core.api.routing import Call, Endpoint
from core.runtime.core import ReadinessProbe

log = logging.getLogger("relaybox.health")

READY_TIMEOUT_S = 3.0  # below the usual probe timeout, so a hung dependency answers 503, not nothing

CheckResult = Literal["ok", "unreachable", "timeout"]


class Health(BaseModel):
    status: str
    version: str


class Readiness(BaseModel):
    status: Literal["ready", "not_ready"]
    checks: dict[str, CheckResult] = Field(
        description="Each dependency by name (database, redis when configured) and how it answered"
    )


async def healthz(_call: Call) -> BaseModel:
    return Health(status="ok", version="1.1.0")


async def readyz(call: Call) -> BaseModel:
    """Every readiness probe of the Core, concurrently, each bounded; 503 names the failing ones.
    Only a probe's name and outcome are answered or logged, never an address or an error's text."""
    checks: dict[str, CheckResult] = {}

    async def check(name: str, probe: ReadinessProbe) -> None:
        try:
            with anyio.fail_after(READY_TIMEOUT_S):
                await probe()
        except TimeoutError:
            checks[name] = "timeout"
        except Exception as error:
            checks[name] = "unreachable"
            log.warning("readiness check failed", extra={"check": name, "error": type(error).__name__})
        else:
            checks[name] = "ok"

    async with anyio.create_task_group() as tasks:
        for name, probe in call.core.readiness_probes.items():
            tasks.start_soon(check, name, probe)
    ready = all(result == "ok" for result in checks.values())
    if not ready:
        call.status = 503
    return Readiness(status="ready" if ready else "not_ready", checks=dict(sorted(checks.items())))


def openapi_response(document: dict[str, object]) -> Callable[[Request], Awaitable[Response]]:
    async def openapi(_request: Request) -> Response:
        return JSONResponse(document)

    return openapi


ENDPOINTS = [
    Endpoint(
        "GET", "/healthz", healthz, "Liveness: the process answers", auth=None, response=Health, tag="health"
    ),
    Endpoint(
        "GET",
        "/readyz",
        readyz,
        "Readiness: the database (and Redis, when configured) answer",
        auth=None,
        response=Readiness,
        tag="health",
        extra={"also": {503: "Not ready: the same body; `checks` names what did not answer"}},
    ),
]
