"""/openapi.json is OpenAPI 3.1, in step with the routes the app serves."""

from __future__ import annotations

from typing import Any

from openapi_spec_validator import OpenAPIV31SpecValidator
from starlette.routing import Route
from starlette.testclient import TestClient

from core.errors import CATALOGUE

# The document itself; the MCP transport (JSON-RPC, not REST); Prometheus metrics (text format).
NOT_REST = {"/openapi.json", "/mcp", "/metrics"}


def served_operations(client: TestClient) -> set[tuple[str, str]]:
    operations = set()
    for route in client.app.routes:  # type: ignore[attr-defined]
        if isinstance(route, Route) and not route.include_in_schema:
            # Only pages (the landing page, docs, the web app) and the disabled documents route,
            # which must look like an unknown route, are left out; never a route of the API.
            assert not route.path.startswith("/v1/") or route.path == "/v1/documents", route.path
            continue
        if isinstance(route, Route) and route.path not in NOT_REST:
            for method in route.methods or ():
                if method != "HEAD":
                    operations.add((route.path, method.lower()))
    return operations


def test_every_served_route_is_documented_and_nothing_else(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    documented = {(path, method) for path, item in document["paths"].items() for method in item}
    assert documented == served_operations(client)


def test_the_document_is_openapi_3_1_with_resolvable_references(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    assert document["openapi"] == "3.1.0"
    assert document["info"]["version"] == "1.1.0"
    schemas = document["components"]["schemas"]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                assert ref.startswith("#/components/schemas/")
                assert ref.removeprefix("#/components/schemas/") in schemas, ref
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)


def test_the_document_is_valid_under_the_openapi_3_1_schema(client: TestClient) -> None:
    """Checked by an independent validator (openapi-spec-validator), which also holds every
    default to its own schema: an optional field documented without null has no null default."""
    document = client.get("/openapi.json").json()
    problems = [error.message for error in OpenAPIV31SpecValidator(document).iter_errors()]
    assert problems == []


def test_every_documented_error_code_is_in_the_catalogue(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    for item in document["paths"].values():
        for operation in item.values():
            for status, response in operation["responses"].items():
                description = response["description"]
                if description.startswith("Error codes: "):
                    for code in description.removeprefix("Error codes: ").split(", "):
                        assert CATALOGUE[code].status == int(status)


def test_authenticated_routes_declare_the_bearer_scheme_and_their_401(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    operation = document["paths"]["/v1/tokens"]["get"]
    assert operation["security"] == [{"bearer": []}]
    assert "401" in operation["responses"]


def test_a_method_a_path_does_not_take_is_405_listing_every_method_it_does(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    for path, operations in document["paths"].items():
        taken = {method.upper() for method in operations}
        other = next(m for m in ("PUT", "PATCH", "DELETE", "POST", "GET") if m not in taken)
        concrete = path.replace("{", "x").replace("}", "")
        answer = client.request(other, concrete)
        assert answer.status_code == 405, (path, other, answer.status_code)
        assert answer.json()["error"]["code"] == "method_not_allowed"
        allowed = set(answer.headers["allow"].split(", ")) - {"HEAD"}
        assert allowed == taken, (path, allowed, taken)
