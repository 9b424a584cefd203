"""Rendering the error catalogue for REST, once: the standard shape, the flat authentication shape,
and 500 ``internal_error`` for anything unexpected (logged with the request's id, never shown)."""

from __future__ import annotations

import json
import logging

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from core.api.request_ids import new_request_id, request_id
from core.availability import as_unavailable
from core.errors import CATALOGUE, RelayError

log = logging.getLogger("relaybox.api")


class ErrorJSON(JSONResponse):
    """JSON in ASCII: an error may echo what the caller sent, which JSON can carry and UTF-8 cannot
    (half of a surrogate pair); escaped, it is still the same JSON."""

    def render(self, content: object) -> bytes:
        return json.dumps(content, separators=(",", ":")).encode("ascii")


def render(error: RelayError) -> JSONResponse:
    headers = dict(error.headers)
    if error.spec.flat:
        body: dict[str, object] = {"error": error.code}
        if error.message:
            body["message"] = error.message
        headers.setdefault("WWW-Authenticate", "Bearer")
        return ErrorJSON(body, status_code=error.status, headers=headers)
    inner: dict[str, object] = {"code": error.code, "message": error.message}
    if error.details:
        inner["details"] = error.details
    return ErrorJSON({"error": inner}, status_code=error.status, headers=headers)


# The paths whose contract is a bodiless 404 answer with this app: an unknown route of the API
# (the spec's "a plain 404 with no body"), the disabled documents route (which must look exactly
# like one) and an unknown discovery document. One instance serves every request (it keeps no state).
PLAIN_NOT_FOUND = Response(status_code=404)
API_PREFIX = "/v1/"


async def http_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        if request.url.path.startswith(API_PREFIX):
            return PLAIN_NOT_FOUND  # an unknown API route says nothing more
        return render(RelayError("not_found"))  # any other unknown path, in the standard shape
    if exc.status_code == 405:
        return render(RelayError("method_not_allowed", headers=dict(exc.headers or {})))
    return Response(status_code=exc.status_code, headers=exc.headers)


def unexpected_error_response(exc: Exception) -> Response:
    """503 ``unavailable`` for a dependency that is down, else 500 ``internal_error``, logged with
    the request's id, which the body names as the ``X-Request-ID`` header does (the exception
    itself is never shown)."""
    unavailable = as_unavailable(exc)  # a dependency down outside an operation (Core.run maps its own)
    if unavailable is not None:
        return render(unavailable)
    rid = request_id.get() or new_request_id()  # none only outside a request
    log.error("unexpected error (request id %s): %s", rid, type(exc).__name__, exc_info=exc)
    spec = CATALOGUE["internal_error"]
    body = {"error": {"code": "internal_error", "message": spec.message, "details": {"request_id": rid}}}
    return JSONResponse(body, status_code=500)
