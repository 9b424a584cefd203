"""ntfy's publish API, so that every tool that speaks ntfy reaches a relaybox account's devices,
end to end encrypted: ``PUT``/``POST /{topic}`` (the body is the message, or a file), ``GET
/{topic}/publish`` (``send``, ``trigger``), the JSON publish ``POST /`` with a ``topic``, and ntfy's
updates by sequence (``/{topic}/{sequence_id}``, ``…/clear``, ``DELETE``). Only publishing:
subscribing is relaybox's own stream. ``docs/compat-ntfy.md`` lists every header and field.

The token is a relaybox sender token, given as ntfy clients give theirs (``ntfy_token``). The topic
names the notification (its title when it has none) and never selects devices. Answers and errors
are in ntfy's JSON shapes, with relaybox's own account of the send under ``relaybox``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import posixpath
import re
from typing import Any
from urllib.parse import urlsplit

import anyio
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from core.api.ntfy_params import Params, Publish, read_publish
from core.api.routing import Call, Endpoint, parse_json, read_body
from core.domain.field_checks import utf8_size
from core.domain.media_types import sniffed
from core.domain.notification import MESSAGE_MAX_BYTES, TTL_MAX_S
from core.domain.secrets import is_sender_token
from core.errors import RelayError
from core.services import attachments
from core.services.attachments import SealedAttachment
from core.services.auth import Accept
from core.services.limits import limit_headers
from core.services.notification_clear import ClearOut, clear_notification
from core.services.send import SendOut, send_notification

TOPIC = re.compile(r"^[-_A-Za-z0-9]{1,64}$")  # ntfy's topic names
# The first path segments relaybox serves itself (tests/app/test_ntfy_topics.py keeps this in step
# with the app's routes): a topic of that name would shadow them.
RESERVED_TOPICS = frozenset(
    {"v1", "mcp", "oauth", "app", "static", "docs", "metrics", "healthz", "readyz", "message", "version"}
)
BODY_MAX_BYTES = attachments.MAX_BYTES + 64 * 1024
EMPTY_MESSAGE = "triggered"  # ntfy's message when a publish has none
ATTACHMENT_LABEL_MAX_CHARS = 24


class TopicPath(Convertor[str]):
    """A topic in a path, never one of ``RESERVED_TOPICS``: relaybox's own paths keep the answers
    they have (an unknown ``/v1/…`` route is a plain 404, a method ``/mcp`` or ``/static/…`` does
    not take a 405), which refuse a publish to such a topic; the JSON publish refuses one with 400
    ``invalid_topic``, in ntfy's shape."""

    regex = "(?!(?:" + "|".join(sorted(RESERVED_TOPICS)) + ")(?:/|$))[-_A-Za-z0-9]{1,64}"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


def register_topic_convertor() -> None:
    """Make ``{topic:ntfy_topic}`` known to Starlette's paths (idempotent; before the routes)."""
    register_url_convertor("ntfy_topic", TopicPath())


def ntfy_token(request: Request) -> str:
    """The sender token as ntfy clients send theirs: ``Authorization: Bearer``, ``Basic`` with the
    token as the password (any user name; or as the user name, with an empty password), or
    ``?auth=`` (the whole Authorization header in unpadded base64url, as ntfy reads it)."""
    header = request.headers.get("authorization", "").strip()
    query = request.query_params.get("auth") or request.query_params.get("authorization")
    if query:
        try:
            header = base64.b64decode(query + "=" * (-len(query) % 4), b"-_", validate=True).decode().strip()
        except (binascii.Error, ValueError) as error:
            raise RelayError("invalid_token") from error
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    if scheme.lower() == "basic":
        try:
            user, _, password = base64.b64decode(credentials.strip()).decode("utf-8").partition(":")
        except (binascii.Error, ValueError) as error:
            raise RelayError("invalid_token") from error
        return user if not is_sender_token(password) and is_sender_token(user) else password
    raise RelayError(
        "missing_token", "Send the token as ntfy clients do: Bearer, Basic (as the password) or ?auth=."
    )


def ntfy_error(error: RelayError) -> Response:
    """ntfy's error shape, ``{code, http, error}``; relaybox's code and details under ``relaybox``."""
    relaybox: dict[str, Any] = {"code": error.code}
    if error.details:
        relaybox["details"] = error.details
    message = error.message or error.code
    body = {"code": error.status * 100, "http": error.status, "error": message, "relaybox": relaybox}
    return JSONResponse(body, status_code=error.status, headers=error.headers)


async def publish(call: Call) -> Response:
    """``PUT``/``POST /{topic}`` and ``/{topic}/{sequence_id}``, and ``GET /{topic}/publish``."""
    topic = checked_topic(call.path["topic"])
    params = Params(call.request.headers, call.request.query_params)
    markdown_type = (
        call.request.headers.get("content-type", "").split(";")[0].strip().lower() == "text/markdown"
    )
    read = read_publish(params, markdown_type=markdown_type)
    if "sequence_id" in call.path:
        read.fields["sequence_id"] = call.path["sequence_id"]
    body = await read_body(call.request, max(call.core.settings.max_body_bytes, BODY_MAX_BYTES))
    attachment = await _place_body(read, body)
    return await _send(call, topic, read, attachment)


async def publish_json(call: Call) -> Response:
    """``POST /`` with ntfy's JSON publish: ``topic`` and the parameters as fields."""
    data = parse_json(await read_body(call.request, call.core.settings.max_body_bytes))
    if not isinstance(data, dict):
        raise RelayError("invalid_body", "ntfy's JSON publish is an object with a topic.")
    topic = checked_topic(data.get("topic"))
    read = read_publish(Params.of_json(data, call.request.headers, call.request.query_params))
    if read.filename and not read.attach_url:
        raise RelayError("invalid_body", "A JSON publish carries no file: filename goes with attach.")
    return await _send(call, topic, read, None)


async def clear(call: Call) -> Response:
    """ntfy's clear (``PUT /{topic}/{sequence_id}/clear``) and delete (``DELETE
    /{topic}/{sequence_id}``): relaybox's clear, which takes the notification away on every device."""
    topic = checked_topic(call.path["topic"])
    sequence_id = call.path["sequence_id"]
    out: ClearOut = await call.core.run(
        clear_notification, call.principal, sequence_id=sequence_id, device=None, ip=call.ip
    )
    event = "message_delete" if call.request.method == "DELETE" else "message_clear"
    now = int(call.core.clock.now())
    answer = {"id": sequence_id, "time": now, "event": event, "topic": topic, "sequence_id": sequence_id}
    answer["relaybox"] = {
        "delivered_to": [d.model_dump() for d in out.delivered_to],
        "warnings": out.warnings,
        "cancelled": [c.model_dump() for c in out.cancelled or ()],
    }
    return JSONResponse(answer, headers=limit_headers(out.rate_limit) if out.rate_limit else None)


async def subscribe(call: Call) -> Response:
    checked_topic(call.path["topic"])
    raise RelayError(
        "ntfy_feature_unsupported",
        "Subscribing is not offered: relaybox delivers to its own paired devices, end to end encrypted.",
        details={"feature": "subscribe"},
    )


def checked_topic(topic: Any) -> str:
    if not isinstance(topic, str) or not TOPIC.fullmatch(topic):
        raise RelayError("invalid_topic", "A topic is 1-64 characters of A-Z a-z 0-9 _ -.")
    if topic.lower() in RESERVED_TOPICS:
        raise RelayError("invalid_topic", f"{topic} is one of relaybox's own paths; choose another topic.")
    return topic


async def _place_body(read: Publish, body: bytes) -> SealedAttachment | None:
    """ntfy's rule for the body: with ``Attach`` it is the message; with ``Filename``, or when it is
    not UTF-8 text or longer than a message may be (relaybox's 1500 bytes), a file; else the
    message. A file is sealed off the event loop."""
    text = _utf8(body)
    is_file = not read.attach_url and (
        bool(read.filename) or text is None or utf8_size(text.strip()) > MESSAGE_MAX_BYTES
    )
    if not is_file:
        if text is None:
            raise RelayError("invalid_message", "With Attach, the body is the message: UTF-8 text.")
        if text.strip():
            read.fields["message"] = text.strip()
        return None
    kind, extension = sniffed(body, read.filename or None)
    name = read.filename or f"attachment{extension}"
    read.fields.setdefault("message", f"You received a file: {name}")
    return await anyio.to_thread.run_sync(
        functools.partial(attachments.seal, body, name=name, mime_type=kind)
    )


async def _send(call: Call, topic: str, read: Publish, attachment: SealedAttachment | None) -> Response:
    fields = read.fields
    fields.setdefault("message", EMPTY_MESSAGE)
    fields.setdefault("title", topic)
    if read.attach_url:  # never fetched: the phone gets a button that opens it
        label = (read.filename or _url_name(read.attach_url))[:ATTACHMENT_LABEL_MAX_CHARS]
        fields["actions"] = [
            *fields.get("actions", []),
            {"action": "view", "label": label, "url": read.attach_url},
        ]
    sent: SendOut = await call.core.run(
        send_notification, call.principal, fields=fields, ip=call.ip, attachment=attachment
    )
    return JSONResponse(
        _answer(sent, topic, read, attachment, int(call.core.clock.now())),
        headers=limit_headers(sent.rate_limit) if sent.rate_limit else None,
    )


def _answer(
    sent: SendOut, topic: str, read: Publish, attachment: SealedAttachment | None, now: int
) -> dict[str, Any]:
    """The message as ntfy answers a publish; a scheduled one's ``time`` is its delivery's, as ntfy's."""
    fields = read.fields
    ttl = fields.get("ttl", TTL_MAX_S)
    now = sent.deliver_at or now
    answer: dict[str, Any] = {
        "id": sent.id,
        "time": now,
        "expires": now + ttl,
        "event": "message",
        "topic": topic,
    }
    answer["title"] = fields["title"]
    answer["message"] = fields["message"]
    priority = {"min": 1, "low": 2, "default": 3, "high": 4, "urgent": 5}.get(
        fields.get("priority", "default")
    )
    answer.update({"priority": priority, "sequence_id": sent.sequence_id})
    for ours, theirs in (("tags", "tags"), ("url", "click"), ("icon", "icon")):
        if fields.get(ours):
            answer[theirs] = fields[ours] if ours != "tags" else [t.strip() for t in fields[ours].split(",")]
    if fields.get("actions"):
        answer["actions"] = fields["actions"]
    if fields.get("markdown"):
        answer["content_type"] = "text/markdown"
    if attachment is not None:  # pulled by the devices, sealed: no URL anyone else could open
        answer["attachment"] = {
            "name": attachment.name,
            "type": attachment.mime_type,
            "size": attachment.size,
        }
        answer["attachment"].update({"expires": now + ttl, "url": ""})
    elif read.attach_url:
        answer["attachment"] = {"name": read.filename or _url_name(read.attach_url), "url": read.attach_url}
    answer["relaybox"] = {
        "delivered_to": [d.model_dump() for d in sent.delivered_to],
        "warnings": sent.warnings,
        **({"scheduled": True, "deliver_at": sent.deliver_at} if sent.scheduled else {}),
    }
    return answer


def _url_name(url: str) -> str:
    """ntfy's name for a linked file: the last segment of the URL's path, else ``attachment``."""
    return posixpath.basename(urlsplit(url).path) or "attachment"


def _utf8(body: bytes) -> str | None:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _endpoint(method: str, path: str, handler: Any, summary: str) -> Endpoint:
    return Endpoint(
        method,
        path,
        handler,
        summary,
        auth=Accept.SENDER_TOKEN,
        tag="ntfy",
        ip_limited=True,
        auth_token=ntfy_token,
        error_shape=ntfy_error,
    )


TOPIC_PATH = "/{topic:ntfy_topic}"
ENDPOINTS = [
    _endpoint("POST", "/", publish_json, "ntfy: publish as JSON"),
    _endpoint("PUT", "/", publish_json, "ntfy: publish as JSON"),
    *(_endpoint(method, TOPIC_PATH, publish, "ntfy: publish") for method in ("POST", "PUT")),
    *(
        _endpoint(m, f"{TOPIC_PATH}/{{sequence_id}}", publish, "ntfy: publish in a sequence")
        for m in ("POST", "PUT")
    ),
    _endpoint("DELETE", f"{TOPIC_PATH}/{{sequence_id}}", clear, "ntfy: delete a sequence's notification"),
    _endpoint("PUT", f"{TOPIC_PATH}/{{sequence_id}}/clear", clear, "ntfy: clear a sequence's notification"),
    *(
        _endpoint("GET", f"{TOPIC_PATH}/{verb}", publish, "ntfy: publish by GET")
        for verb in ("publish", "send", "trigger")
    ),
    *(
        _endpoint("GET", f"{TOPIC_PATH}/{kind}", subscribe, "ntfy: subscribe")
        for kind in ("json", "sse", "raw", "ws")
    ),
]
