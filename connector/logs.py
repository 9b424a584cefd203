"""Logging for ``relaybox serve``: every record passes through redaction before it is written,
uvicorn's access log included (the path-token alias puts a token in the URL)."""

from __future__ import annotations

import logging
from typing import Any

from core.redaction import redact


class RedactSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if record.args:
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in _as_tuple(record.args))
        return True


def _as_tuple(args: Any) -> tuple[Any, ...]:
    return args if isinstance(args, tuple) else (args,)


def log_config() -> dict[str, Any]:
    """uvicorn's log configuration with the redaction filter on every handler."""
    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = {**LOGGING_CONFIG}
    config["filters"] = {"redact": {"()": RedactSecrets}}
    config["handlers"] = {
        name: {**handler, "filters": ["redact"]} for name, handler in LOGGING_CONFIG["handlers"].items()
    }
    config["loggers"] = {
        **LOGGING_CONFIG["loggers"],
        "relaybox": {"handlers": ["default"], "level": "INFO", "propagate": False},
    }
    return config
