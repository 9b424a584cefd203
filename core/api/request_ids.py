"""The id of the HTTP request being handled. The app sets it as a request arrives (the caller's
``X-Request-ID`` when acceptable, else a new one; ``app.logs.start_request_id``) and echoes it in
the response; every record logged while the request is handled names it, and so does a 500's body
(``core.api.errors``)."""

from __future__ import annotations

import random
from contextvars import ContextVar

request_id: ContextVar[str | None] = ContextVar("relaybox_request_id", default=None)


def new_request_id() -> str:
    """32 hex digits: unique, not secret, so no system entropy is spent on it."""
    return f"{random.getrandbits(128):032x}"
