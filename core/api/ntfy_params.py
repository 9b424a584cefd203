"""ntfy's publish parameters, read as ntfy reads them, into a relaybox send's fields.

Each parameter has its header names (``NAMES``, ntfy's aliases); the same names, lowercased, are
query parameters; a header wins over the query. A header's value may be RFC 2047 encoded
(``=?UTF-8?B?…?=``) or raw UTF-8, as ntfy takes it. A JSON publish (``POST /`` with a ``topic``)
carries the same parameters as fields (``JSON_FIELDS``).

What each becomes is in ``docs/compat-ntfy.md``: most map onto a send's fields; features that have
no meaning here are refused with 400 ``ntfy_feature_unsupported`` (details: ``feature``), never
dropped; ``Delay``/``At``/``In`` are read as a send's ``delay`` (``core.domain.delivery_time``),
which schedules it (``core.services.scheduled``).
"""

from __future__ import annotations

import contextlib
import email.errors
import email.header
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.domain.field_checks import InvalidFieldError
from core.domain.ntfy_actions import ntfy_actions
from core.errors import RelayError

NAMES: dict[str, tuple[str, ...]] = {
    "message": ("x-message", "message", "m"),
    "title": ("x-title", "title", "ti", "t"),
    "priority": ("x-priority", "priority", "prio", "p"),
    "tags": ("x-tags", "tags", "tag", "ta"),
    "click": ("x-click", "click"),
    "icon": ("x-icon", "icon"),
    "actions": ("x-actions", "actions", "action"),
    "markdown": ("x-markdown", "markdown", "md"),
    "attach": ("x-attach", "attach", "a"),
    "filename": ("x-filename", "filename", "file", "f"),
    "delay": ("x-delay", "delay", "x-at", "at", "x-in", "in"),
    "sequence_id": ("x-sequence-id", "sequence-id", "sid"),
    "cache": ("x-cache", "cache"),
    "firebase": ("x-firebase", "firebase"),
    "email": ("x-email", "x-e-mail", "email", "e-mail", "mail", "e"),
    "call": ("x-call", "call"),
    "template": ("x-template", "template", "tpl"),
    "unifiedpush": ("x-unifiedpush", "unifiedpush", "up"),
    "poll_id": ("x-poll-id", "poll-id"),
}
_KEY_OF = {name: key for key, names in NAMES.items() for name in names}
# A JSON publish's fields, by parameter (ntfy's publishMessage).
JSON_FIELDS = [
    "message",
    "title",
    "priority",
    "tags",
    "click",
    "icon",
    "actions",
    "markdown",
    "attach",
    "filename",
    "delay",
    "sequence_id",
    "cache",
    "firebase",
    "email",
    "call",
]
PRIORITIES = {"1": "min", "2": "low", "3": "default", "4": "high", "5": "urgent", "max": "urgent"}
PRIORITIES.update({name: name for name in ("min", "low", "default", "high", "urgent")})
# RFC 9218's Priority header ("u=3, i"), which proxies add and ntfy ignores, is not ntfy's.
_HTTP_PRIORITY = re.compile(r"^(u=\d(\s*,\s*i)?|i)$", re.IGNORECASE)
TRUE, FALSE = ("1", "yes", "true"), ("0", "no", "false")
# Features with no meaning here: refused by name (the parameter, and what it would have done).
UNSUPPORTED = {
    "email": "e-mail forwarding",
    "call": "phone calls",
    "template": "message templates",
    "unifiedpush": "UnifiedPush",
    "poll_id": "poll requests",
}
FLAGS = ("template", "unifiedpush")  # yes/no parameters: only "yes" asks for the feature


class Params:
    """One publish's parameters: headers, then the query; or a JSON publish's fields."""

    def __init__(self, headers: Mapping[str, str], query: Mapping[str, str]) -> None:
        self._headers = headers
        self._query = query
        self._values: dict[str, str] | None = None

    @classmethod
    def of_json(cls, data: Mapping[str, Any], headers: Mapping[str, str], query: Mapping[str, str]) -> Params:
        """A JSON publish: its fields, over the request's headers and query (as ntfy sets each
        field as its header and reads on)."""
        params = cls(headers, query)
        given = {key: data[key] for key in JSON_FIELDS if data.get(key) not in (None, "", 0)}
        params._values = {key: _json_text(key, value) for key, value in given.items()}
        return params

    def get(self, key: str) -> str:
        if self._values is not None and self._values.get(key, "").strip():
            return self._values[key].strip()
        for name in NAMES[key]:
            value = _header_text(self._headers.get(name, "")).strip()
            if value and not (name == "priority" and _HTTP_PRIORITY.match(value)):
                return value
        for name in NAMES[key]:
            if value := self._query.get(name, "").strip():
                return value
        return ""

    def flag(self, key: str, default: bool) -> bool:
        value = self.get(key).lower()
        if not value:
            return default
        if value not in TRUE + FALSE:
            raise RelayError("invalid_body", f"{key} is a boolean: yes/no, true/false, 1/0.")
        return value in TRUE


@dataclass
class Publish:
    """A publish read: the send's fields, and what decides the body's role."""

    fields: dict[str, Any]
    attach_url: str = ""
    filename: str = ""


def read_publish(params: Params, *, markdown_type: bool = False) -> Publish:
    """The send's fields from ntfy's parameters (the body is placed by the caller)."""
    for key, feature in UNSUPPORTED.items():
        if params.flag(key, False) if key in FLAGS else params.get(key):
            raise RelayError(
                "ntfy_feature_unsupported", f"{feature}: not offered here.", details={"feature": key}
            )
    if not params.flag("firebase", True):
        raise RelayError(
            "ntfy_feature_unsupported",
            "Firebase: no cannot be honoured: a phone is reached through its push service.",
            details={"feature": "firebase"},
        )
    fields: dict[str, Any] = {}
    message = params.get("message").replace("\\n", "\n")
    for key, value in (
        ("message", message),
        ("title", params.get("title")),
        ("tags", params.get("tags")),
        ("url", params.get("click")),
        ("icon", params.get("icon")),
        ("sequence_id", params.get("sequence_id")),
        ("delay", params.get("delay")),
    ):
        if value:
            fields[key] = value
    if priority := params.get("priority"):
        if priority.lower() not in PRIORITIES:
            raise RelayError(
                "invalid_priority", "Priority must be 1-5, or min, low, default, high, max, urgent."
            )
        fields["priority"] = PRIORITIES[priority.lower()]
    if actions := params.get("actions"):
        try:
            fields["actions"] = ntfy_actions(actions)
        except InvalidFieldError as error:
            raise RelayError(error.code, error.message) from error
    if markdown_type or params.flag("markdown", False):
        fields["markdown"] = True
    if not params.flag("cache", True):
        fields["ttl"] = 0  # not kept for a device that is not connected: relaybox's ttl 0
    attach = params.get("attach")
    if attach and not attach.lower().startswith(("http://", "https://")):
        raise RelayError("invalid_url", "Attach must be an http(s) URL.")
    return Publish(fields, attach, params.get("filename"))


def ntfy_headers_on_send(headers: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """What ``/v1/send`` makes of ntfy's headers, which a caller may send it by habit: a delivery
    time (``Delay``, ``At``, ``In``) is read as its ``delay``, so that a send asked for later is
    scheduled, never delivered at once; any other is not read, and named in a warning."""
    present: dict[str, str] = {}
    for name, value in headers.items():  # each header once: a send carries a few, ntfy knows 60 names
        if name in _KEY_OF:
            present.setdefault(name, value.strip())
    if not present:
        return None, []
    delay = ""
    ignored = []
    for key, names in NAMES.items():
        for name in names:
            value = present.get(name, "")
            if not value or (name == "priority" and _HTTP_PRIORITY.match(value)):
                continue
            if key == "delay":
                delay = delay or value
            else:
                ignored.append(name.title())
    warnings = [
        f"ignored ntfy headers (a send reads its body; ntfy's are read at /{{topic}}): {', '.join(ignored)}"
    ]
    return delay or None, warnings if ignored else []


def _header_text(value: str) -> str:
    """A header as ntfy reads it: raw UTF-8 (which the ASGI server hands over as Latin-1), or RFC
    2047 encoded words."""
    if not value:
        return value
    with contextlib.suppress(UnicodeEncodeError, UnicodeDecodeError):
        value = value.encode("latin-1").decode("utf-8")
    if "=?" in value:
        try:
            return str(email.header.make_header(email.header.decode_header(value)))
        except (ValueError, LookupError, email.errors.HeaderParseError):
            return value
    return value


def _json_text(key: str, value: Any) -> str:
    """A JSON publish's field as the text its header would carry."""
    if key == "tags" and isinstance(value, list):
        return ",".join(str(tag) for tag in value)
    if key == "actions":
        if not isinstance(value, list):
            raise RelayError("invalid_action", "actions is a list of objects in a JSON publish.")
        return json.dumps(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float | str):
        return str(value)
    raise RelayError("invalid_body", f"{key} has the wrong type for ntfy's JSON publish.")
