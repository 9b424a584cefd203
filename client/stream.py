"""Following a device's ``/v1/sync`` stream, opening what arrives, and relaying envelopes to a peer.

Four small parts:

- ``SseParser``: a pure, incremental server-sent-events parser (feed it text in any chunks).
- ``SyncFollower``: one streaming ``GET /v1/sync`` at a time; on any drop it reconnects with
  ``Last-Event-ID`` set to the last event it handed out, after a bounded exponential backoff, so
  nothing is missed or repeated. A 401 ends it (the credential was revoked); so does Ctrl-C.
- ``Opener``: turns a stream event into ``Received`` (sender and decrypted payload) or ``Dropped``
  (a one-line reason); it never raises for what a server or peer sent.
- ``Relay``: seals a payload to a paired device and posts it (``POST /v1/envelopes``).

The last handled sequence id is kept in the state file as ``last_seq`` (``load_last_seq`` /
``save_last_seq``), so the next run resumes where this one stopped.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self, cast

import httpx

from client.api import CONNECT_TIMEOUT_S, USER_AGENT, ApiError, RelayboxApi, error_from_response
from client.state import ClientError, DeviceState, Peer, StateError, update_fields
from core.domain.canonical import canonical_json
from core.domain.envelope import EnvelopeError, PairBox
from core.domain.keys import InvalidPublicKey, decode_public_key

# The server sends a keep-alive comment after 15 s of silence; a read that waits this long means
# the connection is dead even though no error was reported.
READ_TIMEOUT_S = 60.0
BACKOFF_FIRST_S = 0.5
BACKOFF_CAP_S = 10.0
MAX_LINE_CHARS = 1 << 20  # a 64 KiB envelope is ~88 KB of base64; anything near 1 MB is not ours
SERVER: Final = "server"

# Server-sent events.


@dataclass(frozen=True, slots=True)
class SseEvent:
    """A dispatched event: its type (``message`` by default), data lines joined by ``\\n``, and
    the last event id in force when it was dispatched. ``own_id``: the event itself had an ``id``
    line (otherwise ``id`` is inherited from an earlier event)."""

    event: str
    data: str
    id: str | None
    own_id: bool = field(default=False, compare=False)


@dataclass(frozen=True, slots=True)
class SseComment:
    """A comment line (``: keep-alive``), text after the colon and one optional space."""

    text: str


SseItem = SseEvent | SseComment
_LINE_END = re.compile(r"\r\n|\r|\n")


class SseError(ValueError):
    """The stream is not server-sent events we can read (a line beyond ``MAX_LINE_CHARS``)."""


class SseParser:
    """The event-stream grammar of the HTML standard, incrementally: ``feed`` returns what each
    chunk completes. Lines end with CRLF, LF or CR (also split across chunks); a leading BOM is
    skipped; an event still open when the stream ends is never returned."""

    def __init__(self, max_line: int = MAX_LINE_CHARS) -> None:
        self._max_line = max_line
        self._pending = ""
        self._started = False
        self._after_cr = False
        self._event = ""
        self._data: list[str] = []
        self._id_buffer: str | None = None
        self._own_id = False
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None

    def feed(self, text: str) -> list[SseItem]:
        if not text:
            return []
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._after_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF split between two chunks
        self._after_cr = False
        buffer = self._pending + text
        items: list[SseItem] = []
        start = 0
        for end in _LINE_END.finditer(buffer):
            self._line(buffer[start : end.start()], items)
            start = end.end()
        self._pending = buffer[start:]
        self._after_cr = buffer.endswith("\r")
        if len(self._pending) > self._max_line:
            raise SseError(f"a line of more than {self._max_line} characters")
        return items

    def _line(self, line: str, items: list[SseItem]) -> None:
        if not line:
            self._dispatch(items)
        elif line.startswith(":"):
            items.append(SseComment(line[1:].removeprefix(" ")))
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                self._event = value
            elif name == "data":
                self._data.append(value)
            elif name == "id" and "\0" not in value:
                self._id_buffer = value
                self._own_id = True
            elif name == "retry" and value.isascii() and value.isdigit():
                self.retry_ms = int(value)

    def _dispatch(self, items: list[SseItem]) -> None:
        self.last_event_id = self._id_buffer
        if self._data:
            items.append(
                SseEvent(self._event or "message", "\n".join(self._data), self.last_event_id, self._own_id)
            )
        self._event, self._data, self._own_id = "", [], False


# Following /v1/sync.


@dataclass(frozen=True, slots=True)
class SyncEvent:
    """One ``/v1/sync`` frame: ``seq`` (its id), ``event`` (envelope, push, token_update) and the
    raw JSON ``data``.

    ``live``: a push sent only to open streams and never queued (ring, reminders), a frame without
    an ``id`` line. It has no sequence id of its own: ``seq`` is the last id handed out before it
    (0 if none), and it never moves the position.
    """

    seq: int
    event: str
    data: str
    live: bool = False


@dataclass(frozen=True, slots=True)
class KeepAlive:
    """A comment arrived: the stream is up and, for now, quiet."""


KEEP_ALIVE: Final = KeepAlive()
StreamItem = SyncEvent | KeepAlive


class Backoff:
    """Reconnection delays: ``first``, doubling up to ``cap``; ``reset`` after a good connection."""

    def __init__(self, first: float = BACKOFF_FIRST_S, cap: float = BACKOFF_CAP_S) -> None:
        self.first = first
        self.cap = cap
        self._next = first

    def next_delay(self) -> float:
        delay = self._next
        self._next = min(self.cap, self._next * 2)
        return delay

    def reset(self) -> None:
        self._next = self.first


class SyncFollower:
    """Follows ``GET /v1/sync`` for one device across reconnects. Use as a context manager.

    ``after``: start after this sequence id (``None``: everything still queued). ``idle``: end the
    iteration once no event has arrived for that many seconds (``--once``); otherwise it runs
    until the credential is revoked (``ClientError``) or the caller stops. ``max_failures``:
    give up after that many failed connection attempts in a row (``None``: never).
    """

    def __init__(
        self,
        server: str,
        token: str,
        *,
        after: int | None = None,
        idle: float | None = None,
        read_timeout: float = READ_TIMEOUT_S,
        backoff: Backoff | None = None,
        max_failures: int | None = None,
        notice: Callable[[str], None] = lambda _message: None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.last_seq = after
        self.connections = 0
        self._token = token
        self._idle = idle
        self._read_timeout = read_timeout if idle is None else min(read_timeout, idle)
        self._backoff = backoff or Backoff()
        self._max_failures = max_failures
        self._notice = notice
        self._sleep = sleep
        self._clock = clock
        self._http = httpx.Client(
            base_url=server,
            transport=transport,
            headers={"User-Agent": USER_AGENT},
            follow_redirects=False,
        )
        self._server = server

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def events(self) -> Iterator[StreamItem]:
        """Events in order, each once, plus ``KEEP_ALIVE`` for every comment (quiet moments)."""
        failures = 0
        last_event_at = self._clock()
        while True:
            try:
                with self._open() as response:
                    failures = 0
                    self._backoff.reset()
                    self.connections += 1
                    if self.connections > 1:
                        self._notice(f"reconnected, resuming after seq {self.last_seq or 0}")
                    parser = SseParser()
                    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                    try:
                        for chunk in response.iter_bytes():
                            for item in parser.feed(decoder.decode(chunk)):
                                if isinstance(item, SseComment):
                                    if self._idle is not None and self._clock() - last_event_at >= self._idle:
                                        return
                                    yield KEEP_ALIVE
                                    continue
                                event = self._accept(item)
                                if event is not None:
                                    last_event_at = self._clock()
                                    yield event
                    except httpx.ReadTimeout:
                        if self._idle is not None:
                            return  # nothing at all for `idle` seconds: the queue is drained
                        raise
                problem = "the server ended the stream"
            except (httpx.TransportError, SseError, _ServerBusyError) as error:
                failures += 1
                problem = f"connection lost ({_describe(error)})"
                if self._max_failures is not None and failures >= self._max_failures:
                    raise ApiError(
                        0, "connection_failed", f"cannot follow {self._server}: {problem}"
                    ) from error
            delay = self._backoff.next_delay()
            self._notice(f"{problem}; reconnecting in {delay:g} s")
            self._sleep(delay)

    def _open(self) -> _OpenStream:
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Accept": "text/event-stream",
            "Cache-Control": "no-store",
        }
        if self.last_seq is not None:
            headers["Last-Event-ID"] = str(self.last_seq)
        timeout = httpx.Timeout(self._read_timeout, connect=CONNECT_TIMEOUT_S)
        request = self._http.build_request("GET", "/v1/sync", headers=headers, timeout=timeout)
        return _OpenStream(self._http, request, revoked=self.connections > 0)

    def _accept(self, item: SseEvent) -> SyncEvent | None:
        if item.event == "push" and not item.own_id:
            return SyncEvent(self.last_seq or 0, item.event, item.data, live=True)
        seq_text = item.id or ""
        if not (seq_text.isascii() and seq_text.isdigit()):
            self._notice(f"ignored a {item.event!r} event without a numeric id")
            return None
        seq = int(seq_text)
        if self.last_seq is not None and seq <= self.last_seq:
            return None  # already handed out: never repeat
        self.last_seq = seq
        return SyncEvent(seq, item.event, item.data)


class _ServerBusyError(Exception):
    """The server answered 429 or 5xx: worth another try later."""


class _OpenStream:
    """A streaming response that is 200; other statuses become errors (401 ends the follower)."""

    def __init__(self, http: httpx.Client, request: httpx.Request, *, revoked: bool) -> None:
        self._http = http
        self._request = request
        self._revoked = revoked
        self._response: httpx.Response | None = None

    def __enter__(self) -> httpx.Response:
        response = self._http.send(self._request, stream=True)
        if response.status_code == 200:
            self._response = response
            kind = response.headers.get("content-type", "")
            if kind.partition(";")[0].strip().lower() != "text/event-stream":
                response.close()
                raise ApiError(200, "invalid_response", f"the server answered {kind or 'untyped data'}")
            return response
        try:
            response.read()
        finally:
            response.close()
        error = error_from_response(response)
        if response.status_code == 401 and self._revoked:
            raise ClientError(
                "credential_revoked",
                "the server no longer accepts this device's credential: it was disconnected or "
                "removed; pair it again",
            )
        if response.status_code == 429 or response.status_code >= 500:
            raise _ServerBusyError(f"HTTP {response.status_code} {error.code}")
        raise error

    def __exit__(self, *exc_info: object) -> None:
        if self._response is not None:
            self._response.close()


def _describe(error: Exception) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


# Opening what arrives.


@dataclass(frozen=True, slots=True)
class Received:
    """An event that was opened. For ``envelope`` and ``token_update``, ``payload`` is the
    decrypted JSON object; for ``push`` it is the cleartext fields after ``type`` and ``inline``
    is the decrypted inline ``payload`` envelope, if the push carried one. ``live``: a push that was
    never queued (see ``SyncEvent``); its JSON form has ``"seq": null`` and ``"live": true``."""

    seq: int
    event: str
    sender: str
    sender_name: str
    type: str
    payload: dict[str, Any]
    inline: dict[str, Any] | None = None
    live: bool = False

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "seq": None if self.live else self.seq,
            "event": self.event,
            "from": self.sender,
            "type": self.type,
            "payload": self.payload,
        }
        if self.inline is not None:
            record["inline"] = self.inline
        if self.live:
            record["live"] = True
        return record


@dataclass(frozen=True, slots=True)
class Dropped:
    """An event that could not be opened or read; the message is dropped with this reason."""

    seq: int
    event: str
    sender: str
    reason: str


class _Drop(Exception):  # noqa: N818 - internal signal carrying the reason
    pass


class Opener:
    """Opens stream events for the device whose state is at ``path``. A sender it does not know is
    looked up again in the state file once (a device paired while this process runs)."""

    def __init__(self, path: Path, state: DeviceState) -> None:
        self._path = path
        self._state = state
        self._boxes: dict[str, PairBox] = {}

    @property
    def state(self) -> DeviceState:
        return self._state

    def open(self, event: SyncEvent) -> Received | Dropped:
        sender = SERVER
        try:
            data = _json_object(event.data.encode(), "the event data")
            if event.event == "push":
                return self._push(event, data)
            if event.event not in ("envelope", "token_update"):
                raise _Drop(f"unknown event kind {event.event!r}")
            sender = _field(data, "from")
            label = _field(data, "type")
            payload = self._open_blob(sender, _field(data, "blob"))
            if payload["type"] != label or (event.event == "token_update") != (label == "token_update"):
                raise _Drop(f"labelled {label!r} but the payload is {payload['type']!r}")
            return Received(event.seq, event.event, sender, self.name_of(sender), label, payload)
        except _Drop as drop:
            return Dropped(event.seq, event.event, sender, str(drop))

    def name_of(self, sender: str) -> str:
        if sender == SERVER:
            return SERVER
        peer = self._state.peers.get(sender)
        return (peer.name if peer is not None else "") or sender

    def _push(self, event: SyncEvent, data: dict[str, Any]) -> Received:
        push_type = _field(data, "type")
        fields = {key: value for key, value in data.items() if key not in ("seq", "type")}
        inline = None
        if "payload" in fields:
            inline = self._open_blob(SERVER, _field(data, "payload"))
        return Received(event.seq, "push", SERVER, SERVER, push_type, fields, inline, live=event.live)

    def _open_blob(self, sender: str, blob_text: str) -> dict[str, Any]:
        try:
            blob = base64.b64decode(blob_text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise _Drop("the envelope is not base64") from exc
        try:
            plaintext = self._box(sender).open(blob)
        except EnvelopeError as exc:
            raise _Drop(f"cannot open the envelope ({type(exc).__name__}: {exc})") from exc
        payload = _json_object(plaintext, "the payload")
        if not isinstance(payload.get("type"), str) or not payload["type"]:
            raise _Drop("the payload has no type")
        return payload

    def _box(self, sender: str) -> PairBox:
        box = self._boxes.get(sender)
        if box is None:
            key = self._public_key(sender)
            try:
                box = PairBox(self._state.secret_key_bytes, key)
            except InvalidPublicKey as exc:
                raise _Drop(f"unusable key for {sender}: {exc}") from exc
            self._boxes[sender] = box
        return box

    def _public_key(self, sender: str) -> bytes:
        if sender == SERVER:
            return decode_public_key(self._state.server_public_key)
        if sender not in self._state.peers:
            self._reload()
        peer = self._state.peers.get(sender)
        if peer is None:
            raise _Drop(f"{sender} is not a paired device")
        return peer.public_key_bytes

    def _reload(self) -> None:
        try:
            fresh = DeviceState.load(self._path, role=self._state.role)
        except StateError:
            return
        if fresh.device_id == self._state.device_id:
            self._state = fresh


def _json_object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        value: object = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _Drop(f"{what} is not UTF-8 JSON") from exc
    if not isinstance(value, dict):
        raise _Drop(f"{what} is not a JSON object")
    return cast(dict[str, Any], value)


def _field(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise _Drop(f"the event has no {key!r}")
    return value


# Dispatch: what a received payload or push means, as one line of text.

Describe = Callable[[Received], str]


@dataclass
class Dispatcher:
    """Describers by envelope payload type and by push type; the fallback prints the fields.

    Commands extend the tables (``payloads["reminder"] = …``); a describer may also act (reply,
    ring) before returning its line. The CLI defers Ctrl-C while one runs (an event is handled
    whole or not at all), so a describer must not wait long. A describer that printed everything
    itself (``client.phone_ops``) returns ``""``: nothing more is shown for the event, in either
    output mode.
    """

    payloads: dict[str, Describe] = field(default_factory=dict)
    pushes: dict[str, Describe] = field(default_factory=dict)

    def describe(self, item: Received) -> str:
        table = self.pushes if item.event == "push" else self.payloads
        describer = table.get(item.type, describe_fields)
        line = describer(item)
        if not line:
            return ""
        return f"[live] {line}" if item.live else f"[seq {item.seq}] {line}"


def one_line(text: object) -> str:
    """Control characters (newlines, terminal escapes) shown as escapes, so one event is one line."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in str(text))


def describe_fields(item: Received) -> str:
    shown = item.payload if item.event != "push" or item.inline is None else item.inline
    fields = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in shown.items() if k != "type")
    origin = "push " if item.event == "push" else ""
    return one_line(f"{origin}{item.type} from {item.sender_name}: {fields or '(no fields)'}")


def describe_clipboard(item: Received) -> str:
    return f"clipboard from {one_line(item.sender_name)}: {one_line(item.payload.get('text', ''))}"


def describe_notification(item: Received) -> str:
    note = item.payload if item.event != "push" else (item.inline or {})
    title = note.get("title")
    message = one_line(note.get("message", ""))
    origin = "push " if item.event == "push" else ""
    return (
        f"{origin}notification: {one_line(title)} — {message}"
        if title
        else f"{origin}notification: {message}"
    )


def describe_token_update(item: Received) -> str:
    tokens = item.payload.get("tokens")
    if not isinstance(tokens, list) or not tokens:
        return "tokens now: none"
    names = []
    for token in tokens:
        entry = cast(dict[str, Any], token) if isinstance(token, dict) else {}
        scope = entry.get("scope")
        names.append(f"{entry.get('label', '?')} ({scope})" if scope else str(entry.get("label", "?")))
    return one_line(f"tokens now: {', '.join(names)}")


def default_dispatcher() -> Dispatcher:
    return Dispatcher(
        payloads={
            "clipboard": describe_clipboard,
            "notification": describe_notification,
            "token_update": describe_token_update,
        },
        pushes={"notification": describe_notification},
    )


# Relaying to a paired device.


@dataclass(frozen=True, slots=True)
class Relayed:
    peer_id: str
    peer: Peer
    seq: int
    msg_id: str


class Relay:
    """Seals payloads to paired devices and posts them over one connection. A context manager."""

    def __init__(
        self, path: Path, state: DeviceState, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.path = path
        self.state = state
        self._api = _RelayApi(state.server, state.device_token, transport=transport)
        self._boxes: dict[str, PairBox] = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._api.close()

    def send(self, payload: dict[str, Any], *, to: str | None = None, ttl: int | None = None) -> Relayed:
        """Seal ``payload`` (a JSON object with ``type``) to the peer ``to`` and post it."""
        peer_id, peer = resolve_peer(self.state, to)
        box = self._boxes.get(peer_id)
        if box is None:
            box = self._boxes[peer_id] = PairBox(self.state.secret_key_bytes, peer.public_key_bytes)
        blob = box.seal(canonical_json(payload))
        seq, msg_id = self._api.post_envelope(to=peer_id, type=str(payload["type"]), blob=blob, ttl=ttl)
        return Relayed(peer_id, peer, seq, msg_id)

    def send_text(self, text: str, *, to: str | None = None) -> Relayed:
        """Relay ``text`` as a clipboard payload: ``{"type": "clipboard", "text": text}``."""
        return self.send({"type": "clipboard", "text": text}, to=to)


class _RelayApi(RelayboxApi):
    def post_envelope(self, *, to: str, type: str, blob: bytes, ttl: int | None) -> tuple[int, str]:
        body: dict[str, Any] = {"to": to, "type": type, "blob": base64.b64encode(blob).decode()}
        if ttl is not None:
            body["ttl"] = ttl
        raw = self._call("POST", "/v1/envelopes", body=body, expect=202)
        seq = raw.get("seq") if isinstance(raw, dict) else None
        msg_id = raw.get("msg_id") if isinstance(raw, dict) else None
        if not isinstance(seq, int) or not isinstance(msg_id, str):
            raise ApiError(202, "invalid_response", "the relay answer lacks seq or msg_id")
        return seq, msg_id


def resolve_peer(state: DeviceState, to: str | None) -> tuple[str, Peer]:
    """The paired device named by id or name; with ``to`` None, the only one."""
    peers = state.peers
    if not peers:
        raise ClientError("not_paired", "this device is not paired with any device yet")
    listing = ", ".join(f"{peer.name or '(unnamed)'} [{peer_id}]" for peer_id, peer in peers.items())
    if to is None:
        if len(peers) > 1:
            raise ClientError("peer_required", f"several paired devices ({listing}); choose one with --to")
        return next(iter(peers.items()))
    if to in peers:
        return to, peers[to]
    matches = [(i, p) for i, p in peers.items() if p.name == to] or [
        (i, p) for i, p in peers.items() if p.name.casefold() == to.casefold()
    ]
    if len(matches) > 1:
        raise ClientError(
            "ambiguous_peer", f"several paired devices are called {to!r}; use the id ({listing})"
        )
    if not matches:
        raise ClientError("unknown_peer", f"no paired device {to!r} (paired: {listing})")
    return matches[0]


# Where the last run stopped.

LAST_SEQ = "last_seq"


def load_last_seq(path: Path) -> int | None:
    """``last_seq`` from the state file, or ``None`` when absent or unusable."""
    try:
        raw: object = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = raw.get(LAST_SEQ) if isinstance(raw, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def save_last_seq(path: Path, device_id: str, seq: int) -> None:
    """Record ``seq`` in the state file, changing nothing else (read fresh, so fields another
    command wrote meanwhile survive). A file that now holds another device is left alone."""
    update_fields(path, device_id, {LAST_SEQ: seq})


class Position:
    """Keeps ``last_seq`` in the state file without a disk write per event: at most one write per
    ``interval`` while events stream in, one when the stream goes quiet, and one at ``flush``."""

    def __init__(
        self,
        path: Path,
        device_id: str,
        seq: int | None,
        *,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.seq = seq
        self._device_id = device_id
        self._saved = seq
        self._interval = interval
        self._clock = clock
        self._saved_at = clock()

    def advance(self, seq: int) -> None:
        self.seq = seq
        if self._clock() - self._saved_at >= self._interval:
            self.flush()

    def flush(self) -> None:
        if self.seq is not None and self.seq != self._saved:
            save_last_seq(self.path, self._device_id, self.seq)
            self._saved = self.seq
        self._saved_at = self._clock()
