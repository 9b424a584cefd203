"""A notification's action buttons (pure; no I/O): at most three, each a ``view`` (open a URL) or an
``http`` request (``method`` POST, PUT or GET, an optional text ``body``) that the phone makes only
when the person taps it. ``{label, url}`` without ``action`` is a view, as it always was."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.domain.field_checks import InvalidFieldError, check_url, is_unicode, utf8_size

MAX_ACTIONS = 3
ACTION_LABEL_MAX_BYTES = 32
ACTION_BODY_MAX_BYTES = 512
ACTION_KINDS = ("view", "http")
HTTP_METHODS = ("POST", "PUT", "GET")
_KEYS = {"view": {"action", "label", "url"}, "http": {"action", "label", "url", "method", "body"}}


@dataclass(frozen=True, slots=True)
class Action:
    label: str
    url: str
    kind: str = "view"
    method: str | None = None  # http only: POST, PUT or GET
    body: str | None = None  # http only, never with GET

    def payload(self) -> dict[str, Any]:
        """The action as the phone receives it (``docs/protocol.md``), optional fields omitted."""
        fields: dict[str, Any] = {"action": self.kind, "label": self.label, "url": self.url}
        if self.method is not None:
            fields["method"] = self.method
        if self.body is not None:
            fields["body"] = self.body
        return fields


def parse_actions(value: Any) -> tuple[Action, ...]:
    """Up to ``MAX_ACTIONS`` actions; raises ``InvalidFieldError`` (``invalid_action``) otherwise."""
    if value is None or value == "":
        return ()
    if not isinstance(value, list) or len(value) > MAX_ACTIONS:
        raise InvalidFieldError(
            "invalid_action", f"actions must be a list of at most {MAX_ACTIONS} {{action?, label, url}}."
        )
    return tuple(_action(item) for item in value)


def _action(item: Any) -> Action:
    if not isinstance(item, dict):
        raise InvalidFieldError("invalid_action", "each action is an object {action?, label, url}.")
    kind = item.get("action", "view")
    if kind not in ACTION_KINDS:
        raise InvalidFieldError("invalid_action", "an action is view (open a URL) or http (a request).")
    unknown = set(item) - _KEYS[kind]
    if unknown:
        takes = ", ".join(sorted(_KEYS[kind]))
        raise InvalidFieldError("invalid_action", f"a {kind} action takes {takes}, not {sorted(unknown)}.")
    label = item.get("label")
    fits = isinstance(label, str) and 1 <= utf8_size(label) <= ACTION_LABEL_MAX_BYTES and is_unicode(label)
    if not fits:
        raise InvalidFieldError("invalid_action", f"an action label is 1-{ACTION_LABEL_MAX_BYTES} bytes.")
    try:
        url = check_url(item.get("url"), "invalid_action", "action url")
    except InvalidFieldError as exc:
        raise InvalidFieldError("invalid_action", exc.message, exc.details) from exc
    if url is None:
        raise InvalidFieldError("invalid_action", "an action needs a url.")
    assert isinstance(label, str)
    if kind == "view":
        return Action(label, url)
    method, body = _method(item.get("method")), _body(item.get("body"))
    if method == "GET" and body is not None:
        raise InvalidFieldError("invalid_action", "a GET action carries no body.")
    return Action(label, url, "http", method, body)


def _method(value: Any) -> str:
    if value is None or value == "":
        return "POST"
    if not isinstance(value, str) or value.upper() not in HTTP_METHODS:
        raise InvalidFieldError("invalid_action", "an http action's method is POST, PUT or GET.")
    return value.upper()


def _body(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not is_unicode(value):
        raise InvalidFieldError("invalid_action", "an http action's body is text.")
    size = utf8_size(value)
    if size > ACTION_BODY_MAX_BYTES:
        raise InvalidFieldError(
            "invalid_action",
            f"an http action's body is at most {ACTION_BODY_MAX_BYTES} bytes.",
            {"bytes": size, "max": ACTION_BODY_MAX_BYTES},
        )
    return value
