"""Logging for ``relaybox serve``: every record passes through redaction before it is written,
uvicorn's access log included (the path-token alias puts a token in the URL).

Two formats (``RELAYBOX_LOG_FORMAT``): ``text`` for a terminal, and ``json``, one object a line on
stdout, with the request id (``X-Request-ID``) and, in the access log, the route template instead
of the requested path. Nothing logs a message's text; secrets are redacted in both formats.
"""

from __future__ import annotations

import json
import logging
import logging.config
import re
import traceback
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal

from starlette.types import Message, Scope

from core.api.ntfy import TOPIC_PATH
from core.api.request_ids import new_request_id, request_id
from core.redaction import redact

REQUEST_ID_HEADER = "x-request-id"
SAFE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")

_HEADER = REQUEST_ID_HEADER.encode()

route_template: ContextVar[str | None] = ContextVar("relaybox_route", default=None)
_ACCESS_ARGS = 5  # uvicorn: client address, method, path with query, HTTP version, status


class RedactSecrets(logging.Filter):
    """On every handler: secrets redacted from every record; uvicorn's access log shows the path
    alone, never its query string (the Pushover shim takes ``?message=…&token=…``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if record.args:
            args = tuple(redact(a) if isinstance(a, str) else a for a in _as_tuple(record.args))
            if record.name == "uvicorn.access" and len(args) == _ACCESS_ARGS:
                args = (*args[:2], logged_path(args[2]), *args[3:])
            record.args = args
        return True


def without_query(path: object) -> str:
    return str(path).split("?", 1)[0]


def logged_path(path: object) -> str:
    """The path an access log line shows: without its query, and for ntfy's topic routes their
    template (a topic names its notifications, a sequence is the caller's key: their own words)."""
    template = route_template.get()
    if template is not None and template.startswith(TOPIC_PATH):
        return template
    return without_query(path)


def _as_tuple(args: Any) -> tuple[Any, ...]:
    return args if isinstance(args, tuple) else (args,)


def start_request_id(scope: Scope) -> tuple[bytes, bytes]:
    """Give the request an id: the caller's ``X-Request-ID`` when it is a short safe token (and not
    secret-shaped), else a new one. It becomes the id of every record logged while the request is
    handled; returns the response header that echoes it (``app.front`` adds it)."""
    given = b""
    for name, value in scope["headers"]:  # a plain loop: a generator costs more, on every request
        if name == _HEADER:
            given = value
            break
    rid = _accepted_request_id(given.decode("latin-1")) if given else None
    rid = rid or new_request_id()
    # Not reset afterwards: the request's task ends with it (``app.front`` answers an unexpected
    # error in the same frame, and its 500 names this id).
    request_id.set(rid)
    return (_HEADER, rid.encode("latin-1"))


def add_header(start: Message, header: tuple[bytes, bytes]) -> None:
    """Add ``header`` to an ``http.response.start`` message (nothing inside sets the headers added
    this way, so it is appended, not looked for first)."""
    start["headers"] = [*start.get("headers", ()), header]


def _accepted_request_id(value: str) -> str | None:
    if SAFE_REQUEST_ID.fullmatch(value) and redact(value) == value:
        return value
    return None


# The attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, request_id and route when known, the
    record's ``extra`` fields, and for uvicorn's access log its fields with the route template."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        route = route_template.get()
        if (
            record.name == "uvicorn.access"
            and isinstance(record.args, tuple)
            and len(record.args) == _ACCESS_ARGS
        ):
            client, method, path, version, status = record.args
            # The template as written in the code, or the path redacted and never with its query.
            shown = route or redact(without_query(path))
            entry["message"] = f'{client} - "{method} {shown} HTTP/{version}" {status}'
            entry |= {"method": method, "status": status, "client": client}
            if route is None:
                entry["path"] = shown
        else:
            entry["message"] = redact(record.getMessage())
        rid = request_id.get()
        if rid is not None:
            entry["request_id"] = rid
        if route is not None:
            entry["route"] = route
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in entry:
                entry[key] = redact(value) if isinstance(value, str) else _plain(value)
        if record.exc_info:
            entry["exc_info"] = redact("".join(traceback.format_exception(*record.exc_info)))
        return json.dumps(entry, ensure_ascii=False, default=str)


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    return redact(str(value))


def log_config(
    log_format: Literal["text", "json"] = "text", level: Literal["debug", "info", "warning"] = "info"
) -> dict[str, Any]:
    """uvicorn's log configuration with the redaction filter on every handler; ``json`` writes
    every logger (uvicorn's, relaybox's, and warnings of any other) as JSON lines on stdout.
    ``level`` applies to relaybox's loggers (uvicorn's is set by ``uvicorn.Config``)."""
    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = {**LOGGING_CONFIG}
    config["filters"] = {"redact": {"()": RedactSecrets}}
    config["handlers"] = {
        name: {**handler, "filters": ["redact"]} for name, handler in LOGGING_CONFIG["handlers"].items()
    }
    if log_format == "json":
        config["formatters"] = {"json": {"()": JsonFormatter}}
        config["handlers"] = {
            name: {**handler, "formatter": "json", "stream": "ext://sys.stdout"}
            for name, handler in config["handlers"].items()
        }
    config["loggers"] = {
        **LOGGING_CONFIG["loggers"],
        "relaybox": {"handlers": ["default"], "level": level.upper(), "propagate": False},
    }
    config["root"] = {"handlers": ["default"], "level": "WARNING"}  # other libraries: redacted too
    return config


def configure_logging(
    log_format: Literal["text", "json"] = "text", level: Literal["debug", "info", "warning"] = "info"
) -> None:
    """Every record from now on in ``log_format`` (uvicorn applies the same configuration again when
    it starts): also what is logged while the app is built (a warning about a key, an extra that is
    not installed) and Python's warnings, which would otherwise print as plain text on stderr."""
    logging.config.dictConfig(log_config(log_format, level))
    logging.captureWarnings(True)
