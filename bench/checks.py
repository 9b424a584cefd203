"""Checking every response a benchmark gets: the status and the body's shape (the keys an answer
must have and their JSON types), so that a fast wrong answer never counts as a fast answer.

The scripts import it as ``checks`` (``bench/`` is on ``sys.path``); it is not a benchmark.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from harness import BenchError

Shape = Mapping[str, type | tuple[type, ...]]  # key -> the Python type(s) its JSON value decodes to
Classify = Callable[[int, bytes], str]  # (status, body) -> "ok", or what went wrong ("429", ...)

# The answers of relaybox's routes that the benchmarks call (the keys they rely on, not all).
PHONE = {"device_id": str, "device_token": str, "account_id": str, "server_public_key": str}
PAIR_INIT = {"code": str, "device_id": str, "device_token": str, "server_public_key": str}
PAIR_CONFIRM = {"intent": str, "device": dict}
TOKEN = {"id": str, "token": str}
ENVELOPE = {"seq": int, "msg_id": str}
INTERACTION = {"id": str, "status": str, "expires_at": int}  # a question as GET and an answer show it
INTERACTION_CREATED = {**INTERACTION, "created": bool}  # the create answer alone says created
SENT = {"id": str, "delivered_to": list, "warnings": list}


def wrong_in(body: Any, shape: Shape) -> list[str]:
    """The keys of ``shape`` that ``body`` lacks or has with another type; ["body"] if no object."""
    if not isinstance(body, dict):
        return ["body"]
    return [key for key, kind in shape.items() if not isinstance(body.get(key), kind)]


def check_shape(where: str, body: Any, shape: Shape) -> dict[str, Any]:
    """``body`` when it has ``shape``; a BenchError naming the request and what is wrong otherwise."""
    wrong = wrong_in(body, shape)
    if wrong:
        raise BenchError(f"{where}: unexpected answer (wrong: {', '.join(wrong)}): {json.dumps(body)[:200]}")
    checked: dict[str, Any] = body
    return checked


def classifier(expected: int, check: Callable[[Any], bool]) -> Classify:
    """For load rounds: "ok" when the status is ``expected`` and ``check`` passes on the JSON body;
    else the status, with " bad body" or " not JSON" when the status alone was right."""

    def classify(status: int, body: bytes) -> str:
        if status != expected:
            return str(status)
        try:
            decoded = json.loads(body)
        except ValueError:
            return f"{status} not JSON"
        return "ok" if check(decoded) else f"{status} bad body"

    return classify


def sent_to(devices: int) -> Callable[[Any], bool]:
    """A ``POST /v1/send`` answer: a message id and exactly ``devices`` devices reached, no warning."""

    def check(body: Any) -> bool:
        return (
            not wrong_in(body, SENT)
            and body["id"].startswith("msg_")
            and len(body["delivered_to"]) == devices
            and not body["warnings"]
        )

    return check
