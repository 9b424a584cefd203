"""Pushover's message fields, read as Pushover reads them, into a relaybox send's fields
(``docs/compat-pushover.md`` lists each: passed on, mapped, or refused).

- ``priority`` -2..2 is min, low, default, high, urgent; 2 (emergency) is relaybox's urgent until
  acknowledged, with ``retry`` as ``repeat`` and ``expire`` as ``expire`` (both required, as
  Pushover requires them), and ``callback`` (checked as a question's ``callback_url``) POSTed
  once a device acknowledges. ``retry``, ``expire`` and ``callback`` mean nothing at other
  priorities, there as at Pushover.
- ``html=1``: Pushover's HTML subset as Markdown (``core.domain.pushover_html``); ``monospace=1``:
  the message as a Markdown code block. Not both, as Pushover refuses both.
- ``sound``: one of ``SOUNDS`` (what the phones have); ``none`` makes the notification silent
  (relaybox's ``min``), so it cannot go with priority 1 or 2.
- ``timestamp`` and ``ttl`` are passed on; ``encrypted`` (Pushover's end-to-end encryption, with a
  key only a Pushover app holds) and ``tags`` (for Pushover's cancel by tag) are refused.
"""

from __future__ import annotations

from typing import Any

from core.domain.pushover_html import html_to_markdown
from core.errors import RelayError
from core.services import receipt_callbacks
from core.settings import Settings

LEVELS = {"-2": "min", "-1": "low", "0": "default", "1": "high", "2": "urgent"}
PASSED_ON = ("message", "title", "url", "url_title", "ttl", "timestamp")
SOUNDS = {"pushover": "The phone's own notification sound (default)", "none": "None (silent)"}
ALL_DEVICES = {"", "all", "all_devices"}  # Pushover: no device is every device; Apprise sends ALL_DEVICES
REFUSED = {"encrypted": "Pushover's end-to-end encryption", "tags": "tags (Pushover's cancel by tag)"}


def message_fields(settings: Settings, given: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The send's fields, and the URL to call back once acknowledged (priority 2 only)."""
    for name, feature in REFUSED.items():
        if given.get(name) not in (None, "", "0"):
            raise RelayError(
                "pushover_feature_unsupported", f"{feature} is not offered here.", details={"feature": name}
            )
    fields = {key: given[key] for key in PASSED_ON if key in given}
    number = _priority(given.get("priority"))
    fields["priority"] = _sounded(LEVELS[number], given.get("sound"))
    fields["device"] = devices(given.get("device"))
    _formatted(fields, html=_flag(given, "html"), monospace=_flag(given, "monospace"))
    if number != "2":
        return fields, None
    for name, code, rule in (
        ("retry", "invalid_repeat", "30-3600"),
        ("expire", "invalid_expire", "60-10800"),
    ):
        if given.get(name) in (None, ""):
            raise RelayError(code, f"Priority 2 needs {name} ({rule} seconds), as Pushover does.")
    fields["repeat"], fields["expire"] = given["retry"], given["expire"]
    callback = given.get("callback")
    if callback in (None, ""):
        return fields, None
    if not isinstance(callback, str):
        raise RelayError("invalid_callback_url")
    return fields, receipt_callbacks.checked(settings, callback)


def devices(value: Any) -> str | None:
    """Pushover's ``device``: a comma list of names, where Pushover's "every device" forms mean all."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise RelayError("invalid_device")
    names = [name.strip() for name in value.split(",")]
    return "all" if any(name.lower() in ALL_DEVICES for name in names) else ",".join(names)


def _priority(value: Any) -> str:
    if value is None or value == "":
        return "0"
    text = str(value).strip()
    if text not in LEVELS:
        raise RelayError("invalid_priority", "priority must be one of -2, -1, 0, 1, 2.")
    return text


def _sounded(level: str, sound: Any) -> str:
    if sound is None or sound == "" or sound == "pushover":
        return level
    if sound != "none":
        raise RelayError("invalid_sound", details={"sounds": sorted(SOUNDS)})
    if level in ("high", "urgent"):
        raise RelayError("invalid_sound", "sound none (silent) cannot go with priority 1 or 2.")
    return "min"  # relaybox's silent level


def _flag(given: dict[str, Any], name: str) -> bool:
    """Pushover's ``1`` turns it on; anything else leaves it off (pushover-complete sends ``False``)."""
    return str(given.get(name, "")).strip().lower() in ("1", "true", "yes", "on")


def _formatted(fields: dict[str, Any], *, html: bool, monospace: bool) -> None:
    if html and monospace:
        raise RelayError("invalid_body", "html and monospace cannot both be set, as at Pushover.")
    message = fields.get("message")
    if not isinstance(message, str) or not (html or monospace):
        return
    fields["message"] = html_to_markdown(message) if html else f"```\n{message.replace('```', '` ` `')}\n```"
    fields["markdown"] = True
