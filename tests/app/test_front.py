"""Every HTTP request takes one path through ``app.front.RelayboxApp``: a path without parameters is
found by a dictionary lookup that picks what the router would, and every route — looked up or
routed — gets a request id, its metrics and errors in the spec's shape."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Match, Route
from starlette.testclient import TestClient

from app.assembly import create_app
from app.front import RelayboxApp, static_routes
from app.metrics import Metrics
from core.runtime.core import Core


def test_every_looked_up_route_is_the_one_the_router_would_choose(core: Core) -> None:
    app = create_app(core=core)
    assert {"/mcp", "/v1/send", "/v1/sync", "/v1/messages.json"} <= set(app.static_routes)
    for path, route in app.static_routes.items():
        for method in route.methods or ():
            probe = {"type": "http", "path": path, "method": method}
            first = next(r for r in app.router.routes if r.matches(probe)[0] is Match.FULL)
            assert first is route, (path, method)


def test_a_fixed_path_an_earlier_route_takes_is_left_to_the_router(core: Core) -> None:
    async def anything(_request: Request) -> Response:
        return PlainTextResponse("pattern")

    async def fixed(_request: Request) -> Response:
        return PlainTextResponse("fixed")

    routes: list[BaseRoute] = [
        Route("/{name}", anything),
        Route("/fixed", fixed),
        Route("/other", fixed, methods=["POST"]),
    ]
    assert set(static_routes(routes)) == {"/other"}  # /fixed is shadowed; /other (POST) is not
    app = RelayboxApp(routes=routes, metrics=Metrics(core), cross_origin={})
    with TestClient(app) as client:
        assert client.get("/fixed").text == "pattern"
        assert client.post("/other").text == "fixed"
        assert client.get("/other").text == "pattern"  # GET /other: the pattern route takes it


def test_looked_up_and_routed_requests_get_the_same_treatment(core: Core) -> None:
    def boom(_request: Request) -> Response:
        raise RuntimeError("a bug")

    routes = [Route("/boom", boom), Route("/boom/{n}", boom)]
    app = RelayboxApp(routes=routes, metrics=Metrics(core), cross_origin={})
    with TestClient(app, raise_server_exceptions=False) as client:
        for path in ("/boom", "/boom/1"):
            answer = client.get(path, headers={"X-Request-ID": "trace-1"})
            assert answer.status_code == 500 and answer.json()["error"]["code"] == "internal_error"
            assert answer.headers["x-request-id"] == "trace-1"
        wrong = client.post("/boom")
        assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"
        assert set(wrong.headers["allow"].split(", ")) == {"GET", "HEAD"}
        assert client.get("/v1/nothing").content == b""  # an unknown API path: a plain 404
        assert client.get("/nothing").json()["error"]["code"] == "not_found"


def test_requests_are_counted_by_route_template(core: Core) -> None:
    with TestClient(create_app(core=core)) as client:
        client.post("/v1/send", json={"message": "x"})
        client.post("/v1/send/rbs_nope", json={"message": "x"})
        text = client.get("/metrics").text
    assert 'relaybox_requests_total{method="POST",route="/v1/send",status="401"} 1.0' in text
    assert 'relaybox_requests_total{method="POST",route="/v1/send/{token}",status="401"} 1.0' in text
