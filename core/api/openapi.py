"""The OpenAPI 3.1 document, built from the same Endpoint declarations that build the routes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from core.api.routing import Endpoint
from core.errors import CATALOGUE

API_VERSION = "1.1.0"
PATH_PARAM = re.compile(r"{(\w+)}")
BODY_ERRORS = ("invalid_json", "invalid_body", "body_too_large", "unsupported_content_type")
AUTH_ERRORS = ("missing_token", "invalid_token")


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: dict[str, Any] | None = None


class ErrorBody(BaseModel):
    """Standard error shape."""

    error: ErrorDetail


class FlatErrorBody(BaseModel):
    """Authentication failures: ``{error, message?}``."""

    error: Literal["missing_token", "invalid_token"]
    message: str | None = None


def build_openapi(endpoints: list[Endpoint], *, server_url: str) -> dict[str, Any]:
    wanted: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (ErrorBody, "serialization"),
        (FlatErrorBody, "serialization"),
    ]
    for endpoint in endpoints:
        if endpoint.body or endpoint.body_doc:
            wanted.append((endpoint.body or endpoint.body_doc, "validation"))  # type: ignore[arg-type]
        if endpoint.response:
            wanted.append((endpoint.response, "serialization"))
        if endpoint.error_doc:
            wanted.append((endpoint.error_doc, "serialization"))
        if "callback" in endpoint.extra:
            wanted.append((endpoint.extra["callback"].body, "serialization"))
    refs, schema = models_json_schema(
        list(dict.fromkeys(wanted)), ref_template="#/components/schemas/{model}"
    )

    paths: dict[str, dict[str, Any]] = {}
    for endpoint in endpoints:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(endpoint, refs)
    return {
        "openapi": "3.1.0",
        "info": {"title": "relaybox", "version": API_VERSION},
        "servers": [{"url": server_url}],
        "paths": paths,
        "components": {
            "schemas": _without_null_defaults(schema.get("$defs", {})),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _without_null_defaults(node: Any) -> Any:
    """``node`` without ``"default": null`` where its schema does not admit null. A field typed
    ``X | SkipJsonSchema[None] = None`` is documented as X (a form cannot carry a null), and absent
    means its default; pydantic still writes the null default, which X's own schema rejects."""
    if isinstance(node, list):
        return [_without_null_defaults(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        key: _without_null_defaults(value)
        for key, value in node.items()
        if not (key == "default" and value is None and not _admits_null(node))
    }


def _admits_null(schema: dict[str, Any]) -> bool:
    """Whether null is valid under ``schema`` as far as its own keywords say (a ``$ref`` or a
    schema without a type, a const or an enum is taken to admit it)."""
    for branches in ("anyOf", "oneOf"):
        if branches in schema:
            return any(_admits_null(branch) for branch in schema[branches])
    if "const" in schema:
        return schema["const"] is None
    if "enum" in schema:
        return None in schema["enum"]
    types = schema.get("type", "null")
    return "null" in (types if isinstance(types, list) else [types])


def _form_schema(model: type[BaseModel], body_ref: dict[str, Any]) -> dict[str, Any]:
    """The JSON body's fields as a form; a form carries text only, so a field of objects
    (``actions``) is JSON only."""
    objects_only = [name for name in ("actions",) if name in model.model_fields]
    if not objects_only:
        return body_ref
    return {"allOf": [body_ref], "properties": dict.fromkeys(objects_only, False)}


def _path_schema(endpoint: Endpoint, name: str) -> dict[str, Any]:
    """A path parameter: text of at most 128 characters, narrowed where the Endpoint says more
    (``extra["path"][name]``, e.g. a pattern the handler enforces with a code of its own)."""
    narrowed: dict[str, Any] = endpoint.extra.get("path", {}).get(name, {})
    return {"type": "string", "maxLength": 128, **narrowed}


@dataclass(frozen=True)
class Callback:
    """A request the server makes to a URL the caller gave (``Endpoint.extra["callback"]``): the
    body field naming the URL, the body POSTed, and the headers that come with it."""

    url_field: str
    body: type[BaseModel]
    summary: str
    description: str
    headers: dict[str, str]  # name → description


def _callbacks(callback: Callback, refs: Mapping[tuple[Any, JsonSchemaMode], Any]) -> dict[str, Any]:
    headers = [
        {"name": name, "in": "header", "required": True, "schema": {"type": "string"}, "description": text}
        for name, text in callback.headers.items()
    ]
    post = {
        "summary": callback.summary,
        "description": callback.description,
        "parameters": headers,
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": refs[(callback.body, "serialization")]}},
        },
        "responses": {"2XX": {"description": "Delivered; any other answer is a failed attempt"}},
    }
    return {callback.url_field: {f"{{$request.body#/{callback.url_field}}}": {"post": post}}}


def _operation(endpoint: Endpoint, refs: Mapping[tuple[Any, JsonSchemaMode], Any]) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": endpoint.operation_id,
        "summary": endpoint.summary,
        "tags": [endpoint.tag],
    }
    if endpoint.description:
        operation["description"] = endpoint.description
    params = [
        {"name": name, "in": "path", "required": True, "schema": _path_schema(endpoint, name)}
        for name in PATH_PARAM.findall(endpoint.path)
    ]
    params += endpoint.extra.get("query", [])
    if params:
        operation["parameters"] = params
    if endpoint.auth is not None and not endpoint.auth_path_param:
        operation["security"] = [{"bearer": []}]
    if endpoint.body:
        body_ref = refs[(endpoint.body, "validation")]
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body_ref}}}
    elif endpoint.body_doc:
        body_ref = refs[(endpoint.body_doc, "validation")]
        operation["requestBody"] = {
            "required": True,
            "content": {
                "application/json": {"schema": body_ref},
                "application/x-www-form-urlencoded": {"schema": _form_schema(endpoint.body_doc, body_ref)},
                "text/plain": {
                    "schema": {"type": "string", "minLength": 1, "description": "the body is the message"}
                },
            },
        }

    elif "request_content_type" in endpoint.extra:  # a raw body the handler streams itself
        raw = {"type": "string", "contentMediaType": endpoint.extra["request_content_type"]}
        operation["requestBody"] = {
            "required": True,
            "content": {endpoint.extra["request_content_type"]: {"schema": raw}},
        }

    if "callback" in endpoint.extra:
        operation["callbacks"] = _callbacks(endpoint.extra["callback"], refs)

    responses: dict[str, Any] = {}
    success: dict[str, Any] = {"description": endpoint.summary}
    if "content_type" in endpoint.extra:
        schema = endpoint.extra.get("content_schema", {"type": "string"})
        success["content"] = {endpoint.extra["content_type"]: {"schema": schema}}
    if endpoint.response:
        success["content"] = {"application/json": {"schema": refs[(endpoint.response, "serialization")]}}
    responses[str(endpoint.status)] = success
    for status, text in endpoint.extra.get("also", {}).items():
        responses[str(status)] = {"description": text}

    codes = list(endpoint.errors)
    if endpoint.auth is not None:
        codes += AUTH_ERRORS
    if endpoint.body or endpoint.body_doc:
        codes += BODY_ERRORS
    by_status: dict[int, list[str]] = {}
    for code in dict.fromkeys(codes):
        by_status.setdefault(CATALOGUE[code].status, []).append(code)
    by_status.setdefault(500, []).append("internal_error")
    if endpoint.tag != "health":  # anything that touches the database or Redis (core.availability)
        by_status.setdefault(503, []).append("unavailable")
    for status, group in sorted(by_status.items()):
        flat = all(CATALOGUE[code].flat for code in group)
        ref = refs[(FlatErrorBody if flat else ErrorBody, "serialization")]
        if endpoint.error_doc and status != 500:  # a 500 comes from the app's handler, in its shape
            ref = refs[(endpoint.error_doc, "serialization")]
        responses[str(status)] = {
            "description": "Error codes: " + ", ".join(group),
            "content": {"application/json": {"schema": ref}},
        }
    operation["responses"] = responses
    return operation
