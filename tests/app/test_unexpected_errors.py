"""A route that raises something unexpected answers 500 ``internal_error`` naming one request id: the
same in the body, in the ``X-Request-ID`` header and in the logged error, whether the server chose
the id or echoed the caller's."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from app.assembly import create_app
from app.front import RelayboxApp
from app.metrics import Metrics
from core.runtime.core import Core
from oauth.routes import guarded


async def broken(_request: Request) -> Response:
    raise RuntimeError("the handler broke")


@pytest.fixture
def broken_client(core: Core) -> Iterator[TestClient]:
    app = create_app(core=core)
    app.router.routes.append(Route("/v1/test-broken", broken, methods=["GET"]))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize("sent", [None, "caller-7.a"], ids=["server's id", "caller's id"])
def test_a_500_names_the_request_id_of_its_header_and_of_its_log_line(
    broken_client: TestClient, sent: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="relaybox.api")
    headers = {"X-Request-ID": sent} if sent else {}
    response = broken_client.get("/v1/test-broken", headers=headers)
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "internal_error" and "broke" not in response.text
    header = response.headers["x-request-id"]
    assert header == (sent or header) and len(header) == (len(sent) if sent else 32)
    assert error["details"]["request_id"] == header
    logged = [record.getMessage() for record in caplog.records if record.name == "relaybox.api"]
    assert logged == [f"unexpected error (request id {header}): RuntimeError"]


def test_an_oauth_endpoint_that_fails_names_the_request_id_its_header_carries(core: Core) -> None:
    app = RelayboxApp(
        routes=[Route("/oauth/x", guarded(broken)), Route("/oauth/page", guarded(broken, page=True))],
        metrics=Metrics(core),
        cross_origin={},
    )
    with TestClient(app) as client:
        answer = client.get("/oauth/x")
        assert answer.status_code == 500 and answer.json()["error"] == "server_error"
        assert answer.headers["x-request-id"] in answer.json()["error_description"]
        page = client.get("/oauth/page", headers={"X-Request-ID": "trace-9"})
        assert page.status_code == 500 and "request id trace-9" in page.text
