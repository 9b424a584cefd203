"""The client's stream follower: SSE parsing, reconnecting without gaps or repeats, opening what
arrives, relaying, and the ``tail`` / ``phone run`` / ``send`` commands without a real server."""

from __future__ import annotations

import base64
import json
import random
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.types import Message, Receive, Scope, Send

from app.cli import main
from client.api import ApiError
from client.dispatch import default_dispatcher, one_line
from client.opener import Dropped, Opener, Received
from client.phone import run_dispatcher
from client.position import Position, load_last_seq, save_last_seq
from client.relay import resolve_peer
from client.sse import SseComment, SseError, SseEvent, SseItem, SseParser
from client.state import ClientError, DeviceState, Peer
from client.sync_follower import KEEP_ALIVE, Backoff, KeepAlive, SyncEvent, SyncFollower
from core.domain.canonical import canonical_json
from core.domain.envelope import seal
from core.domain.keys import b64encode, generate_keypair
from tests.live import serve_in_thread

# SSE parsing.


def parse(*chunks: str) -> list[SseItem]:
    parser = SseParser()
    return [item for chunk in chunks for item in parser.feed(chunk)]


def test_a_frame_gives_its_id_event_and_data() -> None:
    assert parse('id: 7\nevent: envelope\ndata: {"seq":7}\n\n') == [SseEvent("envelope", '{"seq":7}', "7")]


def test_data_lines_are_joined_with_newlines_and_the_event_type_defaults_to_message() -> None:
    assert parse("data: one\ndata:two\ndata:  three\ndata\n\n") == [
        SseEvent("message", "one\ntwo\n three\n", None)
    ]


def test_comments_come_out_as_comments_and_do_not_end_an_event() -> None:
    items = parse(": relaybox stream\n\n:keep-alive\n\nid: 1\n: inside\ndata: x\n\n")
    assert items == [
        SseComment("relaybox stream"),
        SseComment("keep-alive"),
        SseComment("inside"),
        SseEvent("message", "x", "1"),
    ]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_every_line_ending_is_understood(newline: str) -> None:
    text = newline.join(["id: 3", "event: push", "data: a", "data: b", "", ": c", "", ""])
    assert parse(text) == [SseEvent("push", "a\nb", "3"), SseComment("c")]


def test_a_crlf_split_between_two_chunks_is_one_line_end() -> None:
    assert parse("data: a\r", "\ndata: b\r", "\n\r", "\n") == [SseEvent("message", "a\nb", None)]


def test_any_split_into_chunks_gives_the_same_events() -> None:
    text = (
        '\ufeff: relaybox stream\r\n\r\nid: 1\r\nevent: envelope\r\ndata: {"a": "é€😀"}\r\n\r\n'
        "id: 2\nevent: push\ndata: x\ndata: y\n\n: keep-alive\n\nid: 3\rdata: z\r\r"
    )
    whole = parse(text)
    assert len(whole) == 5
    rng = random.Random(1234)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(text)), rng.randint(1, 12)))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        assert parse(*pieces) == whole
    assert parse(*text) == whole  # one character at a time


def test_the_last_event_id_persists_and_an_event_without_data_only_sets_it() -> None:
    parser = SseParser()
    assert parser.feed("id: 4\n\n") == []
    assert parser.last_event_id == "4"
    assert parser.feed("data: a\n\n") == [SseEvent("message", "a", "4")]
    assert parser.feed("id\ndata: b\n\n") == [SseEvent("message", "b", "")]
    assert parser.feed("id: 9\x000\ndata: c\n\n") == [SseEvent("message", "c", "")]  # NUL: ignored


def test_retry_unknown_fields_and_an_unfinished_event_are_not_events() -> None:
    parser = SseParser()
    assert parser.feed("retry: 2500\nretry: soon\nfoo: bar\nid: 5\ndata: half") == []
    assert parser.feed("\n") == []  # still no blank line: the event is not complete
    assert parser.last_event_id is None


def test_a_line_without_end_beyond_the_limit_is_an_error() -> None:
    parser = SseParser(max_line=10)
    parser.feed("data: 1234")
    with pytest.raises(SseError):
        parser.feed("567")


# A scripted /v1/sync server: each connection follows the next plan.


@dataclass
class Stream:
    """Answer 200 with these chunks, then ``close`` (end cleanly), ``drop`` (cut the connection
    without ending the chunked body) or ``hang`` (stay silent until the client leaves)."""

    chunks: Sequence[str | bytes]
    end: str = "close"
    content_type: bytes = b"text/event-stream"


@dataclass
class Status:
    code: int
    body: dict[str, Any] = field(default_factory=lambda: {"error": "invalid_token"})


class ScriptedSync:
    def __init__(self, *plans: Stream | Status) -> None:
        self.plans = list(plans)
        self.requests: list[dict[str, str]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        headers = {key.decode().lower(): value.decode() for key, value in scope["headers"]}
        self.requests.append(headers | {"path": scope["path"]})
        plan = self.plans[min(len(self.requests), len(self.plans)) - 1]
        if isinstance(plan, Status):
            body = json.dumps(plan.body).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": plan.code,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", plan.content_type)],
            }
        )
        for chunk in plan.chunks:
            body = chunk.encode() if isinstance(chunk, str) else chunk
            await send({"type": "http.response.body", "body": body, "more_body": True})
        if plan.end == "close":
            await send({"type": "http.response.body", "body": b""})
        elif plan.end == "hang":
            with anyio.move_on_after(10):
                received: Message = {"type": ""}
                while received["type"] != "http.disconnect":
                    received = await receive()
        # "drop": return without ending the body; the server cuts the connection


# How long "nothing more arrives" takes in idle mode (the scripted server sends everything at once).
IDLE_S = 0.5


def frame(seq: int, data: str = "{}", event: str = "envelope") -> str:
    return f"id: {seq}\nevent: {event}\ndata: {data}\n\n"


@pytest.fixture
def delays() -> list[float]:
    return []


def follow(url: str, delays: list[float], **options: Any) -> SyncFollower:
    return SyncFollower(url, "dev_token", sleep=delays.append, **options)


def collect(follower: SyncFollower, limit: int = 50) -> tuple[list[int], BaseException | None]:
    """The seqs handed out until the follower ends or raises (at most ``limit`` items)."""
    seqs: list[int] = []
    try:
        with follower:
            for count, item in enumerate(follower.events()):
                if isinstance(item, SyncEvent):
                    seqs.append(item.seq)
                if count >= limit:
                    break
    except ClientError as error:
        return seqs, error
    return seqs, None


def test_a_dropped_connection_resumes_after_the_last_complete_event(delays: list[float]) -> None:
    app = ScriptedSync(
        Stream([": relaybox stream\n\n", frame(1), frame(2), "id: 3\nevent: envelope\nda"], end="drop"),
        Stream([frame(3), frame(4)], end="close"),
        Status(401),
    )
    notices: list[str] = []
    with serve_in_thread(app) as url:
        seqs, error = collect(follow(url, delays, notice=notices.append))
    assert seqs == [1, 2, 3, 4]
    assert isinstance(error, ClientError) and error.code == "credential_revoked"
    assert [r.get("last-event-id") for r in app.requests] == [None, "2", "4"]
    assert all(r["authorization"] == "Bearer dev_token" for r in app.requests)
    assert {r["path"] for r in app.requests} == {"/v1/sync"}
    assert delays == [0.5, 0.5]  # every good connection resets the backoff
    assert "connection lost (RemoteProtocolError" in notices[0]
    assert notices[1] == "reconnected, resuming after seq 2"


def test_an_event_the_server_sends_again_is_not_handed_out_twice(delays: list[float]) -> None:
    app = ScriptedSync(
        Stream([frame(5), frame(6)], end="close"),
        Stream([frame(5), frame(6), frame(7)], end="close"),
        Status(401),
    )
    with serve_in_thread(app) as url:
        seqs, _ = collect(follow(url, delays, after=4))
    assert seqs == [5, 6, 7]
    assert [r.get("last-event-id") for r in app.requests] == ["4", "6", "7"]


def test_the_backoff_doubles_up_to_its_cap_while_the_server_is_unavailable(delays: list[float]) -> None:
    busy = Status(503, {"error": {"code": "unavailable", "message": "try later"}})
    app = ScriptedSync(*[busy] * 7, Status(401))
    with serve_in_thread(app) as url:
        follower = follow(url, delays)
        with pytest.raises(ApiError) as raised, follower:
            list(follower.events())
    assert raised.value.code == "invalid_token"  # refused at the first connection: not "revoked"
    assert delays == [0.5, 1, 2, 4, 8, 10, 10]


def test_backoff_resets_after_a_good_connection() -> None:
    backoff = Backoff(first=0.5, cap=3)
    assert [backoff.next_delay() for _ in range(4)] == [0.5, 1, 2, 3]
    backoff.reset()
    assert backoff.next_delay() == 0.5


def test_an_unreachable_server_fails_after_max_failures(delays: list[float]) -> None:
    follower = follow("http://127.0.0.1:1", delays, max_failures=3)
    with pytest.raises(ApiError) as raised, follower:
        list(follower.events())
    assert raised.value.code == "connection_failed"
    assert delays == [0.5, 1]


def test_a_silent_connection_is_abandoned_after_the_read_timeout(delays: list[float]) -> None:
    app = ScriptedSync(Stream([frame(1)], end="hang"), Stream([frame(2)], end="close"), Status(401))
    notices: list[str] = []
    with serve_in_thread(app) as url:
        seqs, error = collect(follow(url, delays, read_timeout=0.3, notice=notices.append))
    assert seqs == [1, 2]
    assert isinstance(error, ClientError) and error.code == "credential_revoked"
    assert "ReadTimeout" in notices[0]


def test_idle_mode_ends_once_nothing_arrives_and_keep_alives_come_through(delays: list[float]) -> None:
    app = ScriptedSync(Stream([": relaybox stream\n\n", frame(1), frame(2)], end="hang"))
    with serve_in_thread(app) as url:
        follower = follow(url, delays, idle=IDLE_S)
        with follower:
            items = list(follower.events())
    assert items[0] == KEEP_ALIVE
    assert [item.seq for item in items if isinstance(item, SyncEvent)] == [1, 2]
    assert follower.last_seq == 2 and delays == []


def test_a_frame_without_a_numeric_id_is_skipped_with_a_notice(delays: list[float]) -> None:
    app = ScriptedSync(Stream(["event: envelope\ndata: {}\n\n", frame(3)], end="hang"))
    notices: list[str] = []
    with serve_in_thread(app) as url:
        follower = follow(url, delays, idle=IDLE_S, notice=notices.append)
        with follower:
            events = [item for item in follower.events() if not isinstance(item, KeepAlive)]
    assert events == [SyncEvent(3, "envelope", "{}")]
    assert notices == ["ignored a 'envelope' event without a numeric id"]


def test_characters_and_line_ends_split_between_network_chunks_arrive_whole(delays: list[float]) -> None:
    raw = 'id: 1\r\nevent: envelope\r\ndata: {"text":"é€😀"}\r\n\r\n'.encode()
    cut = raw.index("😀".encode()) + 2
    chunks: list[str | bytes] = [
        raw[:10],
        raw[10 : cut - 3],
        raw[cut - 3 : cut],
        raw[cut:-3],
        raw[-3:-1],
        raw[-1:],
    ]
    app = ScriptedSync(Stream(chunks, end="hang"))
    with serve_in_thread(app) as url:
        follower = follow(url, delays, idle=IDLE_S)
        with follower:
            items = list(follower.events())
    assert items == [SyncEvent(1, "envelope", '{"text":"é€😀"}')]


def test_a_response_that_is_not_an_event_stream_is_an_error(delays: list[float]) -> None:
    app = ScriptedSync(Stream(["<html>"], content_type=b"text/html; charset=utf-8"))
    with serve_in_thread(app) as url:
        follower = follow(url, delays)
        with pytest.raises(ApiError) as raised, follower:
            list(follower.events())
    assert raised.value.code == "invalid_response"
    assert "text/html" in raised.value.message


# Opening events.


@dataclass
class Keys:
    secret: bytes
    public: bytes

    @classmethod
    def new(cls) -> Keys:
        return cls(*generate_keypair())


@dataclass
class World:
    path: Path
    state: DeviceState
    me: Keys
    server: Keys
    phone: Keys
    phone_id: str = "phone-1"


@pytest.fixture
def world(tmp_path: Path) -> World:
    me, server, phone = Keys.new(), Keys.new(), Keys.new()
    state = DeviceState(
        server="http://127.0.0.1:1",
        role="computer",
        device_id="computer-1",
        device_token="dev_secret",
        secret_key=b64encode(me.secret),
        public_key=b64encode(me.public),
        server_public_key=b64encode(server.public),
        name="laptop",
        peers={"phone-1": Peer("Pixel", "phone", b64encode(phone.public), "pair-1")},
    )
    path = tmp_path / "computer.json"
    state.save(path)
    return World(path, state, me, server, phone)


def sealed(payload: dict[str, Any], sender: Keys, recipient: Keys) -> str:
    return base64.b64encode(seal(canonical_json(payload), sender.secret, recipient.public)).decode()


def envelope_event(
    seq: int, sender: str, payload: dict[str, Any], blob: str, event: str = "envelope"
) -> SyncEvent:
    data = {"seq": seq, "from": sender, "type": payload["type"], "blob": blob}
    return SyncEvent(seq, event, json.dumps(data))


TOKENS = {
    "type": "token_update",
    "at": 1,
    "tokens": [
        {"id": "tok_1", "label": "cron", "scope": "phone:control", "priority_cap": "high", "created_at": 1},
        {"id": "tok_2", "label": "backup", "priority_cap": "urgent", "created_at": 1},
    ],
}


def test_a_token_update_from_the_server_is_opened_with_the_server_key(world: World) -> None:
    event = envelope_event(9, "server", TOKENS, sealed(TOKENS, world.server, world.me), "token_update")
    opened = Opener(world.path, world.state).open(event)
    assert opened == Received(9, "token_update", "server", "server", "token_update", TOKENS)
    assert default_dispatcher().describe(opened) == "[seq 9] tokens now: cron (phone:control), backup"


def test_a_clipboard_from_the_phone_is_opened_with_its_key(world: World) -> None:
    payload = {"type": "clipboard", "text": "héllo\nthere"}
    opened = Opener(world.path, world.state).open(
        envelope_event(3, "phone-1", payload, sealed(payload, world.phone, world.me))
    )
    assert isinstance(opened, Received)
    assert (opened.sender, opened.sender_name, opened.payload) == ("phone-1", "Pixel", payload)
    assert default_dispatcher().describe(opened) == "[seq 3] clipboard from Pixel: héllo\\nthere"
    assert opened.to_json() == {
        "seq": 3,
        "event": "envelope",
        "from": "phone-1",
        "type": "clipboard",
        "payload": payload,
    }


def tampered(blob: str, index: int) -> str:
    raw = bytearray(base64.b64decode(blob))
    raw[index] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda blob: tampered(blob, -1), "EnvelopeOpenFailed"),
        (lambda blob: tampered(blob, 5), "EnvelopeOpenFailed"),
        (lambda blob: tampered(blob, 0), "UnsupportedWireVersion"),
        (lambda blob: base64.b64encode(base64.b64decode(blob)[:40]).decode(), "EnvelopeTooShort"),
        (lambda blob: blob + "!", "not base64"),
    ],
    ids=["tag", "nonce", "version", "short", "not-base64"],
)
def test_an_altered_envelope_is_dropped_with_a_reason(world: World, change: Any, error: str) -> None:
    payload = {"type": "clipboard", "text": "secret"}
    event = envelope_event(4, "phone-1", payload, change(sealed(payload, world.phone, world.me)))
    opened = Opener(world.path, world.state).open(event)
    assert isinstance(opened, Dropped)
    assert (opened.seq, opened.sender) == (4, "phone-1")
    assert error in opened.reason


def test_an_envelope_sealed_by_someone_else_is_dropped(world: World) -> None:
    payload = {"type": "clipboard", "text": "from the server, claiming to be the phone"}
    event = envelope_event(4, "phone-1", payload, sealed(payload, world.server, world.me))
    opened = Opener(world.path, world.state).open(event)
    assert isinstance(opened, Dropped) and "EnvelopeOpenFailed" in opened.reason


def test_a_sender_paired_after_start_is_found_in_the_state_file(world: World) -> None:
    newcomer = Keys.new()
    payload = {"type": "clipboard", "text": "hi"}
    event = envelope_event(5, "laptop-2", payload, sealed(payload, newcomer, world.me))
    opener = Opener(world.path, world.state)
    unknown = opener.open(event)
    assert isinstance(unknown, Dropped) and "not a paired device" in unknown.reason
    world.state.peers["laptop-2"] = Peer("Desk", "cli", b64encode(newcomer.public), "pair-2")
    world.state.save(world.path)
    opened = opener.open(event)
    assert isinstance(opened, Received) and opened.sender_name == "Desk"


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        (SyncEvent(1, "envelope", "not json"), "not UTF-8 JSON"),
        (SyncEvent(1, "envelope", "[1]"), "not a JSON object"),
        (SyncEvent(1, "envelope", '{"from":"server","type":"clipboard"}'), "no 'blob'"),
        (SyncEvent(1, "surprise", "{}"), "unknown event kind"),
        (SyncEvent(1, "push", '{"seq":1}'), "no 'type'"),
    ],
)
def test_an_unreadable_event_is_dropped(world: World, event: SyncEvent, reason: str) -> None:
    opened = Opener(world.path, world.state).open(event)
    assert isinstance(opened, Dropped) and reason in opened.reason


@pytest.mark.parametrize(
    ("plaintext", "reason"),
    [(b"\xff\xfe", "not UTF-8 JSON"), (b'"text"', "not a JSON object"), (b'{"text":"x"}', "no type")],
)
def test_a_payload_that_is_not_a_typed_json_object_is_dropped(
    world: World, plaintext: bytes, reason: str
) -> None:
    blob = base64.b64encode(seal(plaintext, world.phone.secret, world.me.public)).decode()
    opened = Opener(world.path, world.state).open(envelope_event(2, "phone-1", {"type": "clipboard"}, blob))
    assert isinstance(opened, Dropped) and reason in opened.reason


def test_a_payload_whose_type_differs_from_its_label_is_dropped(world: World) -> None:
    payload = {"type": "notification", "message": "x"}
    blob = sealed(payload, world.phone, world.me)
    event = SyncEvent(2, "envelope", json.dumps({"from": "phone-1", "type": "clipboard", "blob": blob}))
    opened = Opener(world.path, world.state).open(event)
    assert isinstance(opened, Dropped) and "labelled 'clipboard'" in opened.reason


NOTE = {
    "type": "notification",
    "id": "msg_1",
    "sent_at": 1,
    "title": "Backup",
    "message": "done\x1b[2J",
    "priority": "default",
}


def test_a_push_with_an_inline_payload_is_opened_with_the_server_key(world: World) -> None:
    data = {
        "seq": 8,
        "type": "notification",
        "msgId": "msg_1",
        "payload": sealed(NOTE, world.server, world.me),
    }
    opened = Opener(world.path, world.state).open(SyncEvent(8, "push", json.dumps(data)))
    assert isinstance(opened, Received)
    assert (opened.event, opened.type, opened.inline) == ("push", "notification", NOTE)
    assert opened.payload["msgId"] == "msg_1" and "seq" not in opened.payload
    assert default_dispatcher().describe(opened) == "[seq 8] push notification: Backup — done\\x1b[2J"
    assert opened.to_json()["inline"] == NOTE


def test_a_push_with_a_tampered_inline_payload_is_dropped(world: World) -> None:
    blob = tampered(sealed(NOTE, world.server, world.me), 30)
    opened = Opener(world.path, world.state).open(
        SyncEvent(8, "push", json.dumps({"seq": 8, "type": "notification", "payload": blob}))
    )
    assert isinstance(opened, Dropped) and "EnvelopeOpenFailed" in opened.reason


def received_push(push_type: str, **fields: str) -> Received:
    return Received(1, "push", "server", "server", push_type, dict(fields))


def test_the_phone_describes_each_push_type(world: World) -> None:
    describe = run_dispatcher(world.path).describe
    assert describe(received_push("notify", msgId="msg_2", seqId="14")) == (
        "[seq 1] push notify: would fetch message msg_2 (queued as seq 14; it arrives on this stream)"
    )
    assert describe(received_push("reg_challenge", registrationId="reg_1", nonce="n")) == (
        "[seq 1] push reg_challenge: registration id reg_1"
    )
    assert describe(received_push("disconnect", deviceId="phone-1")) == (
        "[seq 1] push disconnect: device phone-1 disconnected"  # the state is a computer's: no name
    )
    assert describe(received_push("batch_dismiss", msgIds="msg_1,msg_2")) == (
        "[seq 1] push batch_dismiss: dismissed msg_1, msg_2"
    )
    assert describe(received_push("ring", durationS="30")) == '[seq 1] push ring from server: durationS="30"'


def test_a_notification_without_title_and_an_unknown_payload_are_one_line() -> None:
    describe = default_dispatcher().describe
    note = Received(
        2, "envelope", "server", "server", "notification", {"type": "notification", "message": "hi"}
    )
    assert describe(note) == "[seq 2] notification: hi"
    odd = Received(3, "envelope", "d1", "Pixel", "ping", {"type": "ping", "n": 1, "s": "a\nb"})
    assert describe(odd) == '[seq 3] ping from Pixel: n=1, s="a\\nb"'
    assert one_line("tab\there\u2028") == "tab\\there\\u2028"


# Relaying and where a run stopped.


def test_the_peer_is_chosen_by_id_or_name_or_as_the_only_one(world: World) -> None:
    assert resolve_peer(world.state, None)[0] == "phone-1"
    world.state.peers["laptop-2"] = Peer("Desk", "cli", world.state.peers["phone-1"].public_key, "p2")
    world.state.peers["laptop-3"] = Peer("desk", "cli", world.state.peers["phone-1"].public_key, "p3")
    assert resolve_peer(world.state, "laptop-2")[0] == "laptop-2"
    assert resolve_peer(world.state, "Desk")[0] == "laptop-2"
    assert resolve_peer(world.state, "PIXEL")[0] == "phone-1"
    for to, code in [(None, "peer_required"), ("DESK", "ambiguous_peer"), ("nope", "unknown_peer")]:
        with pytest.raises(ClientError) as raised:
            resolve_peer(world.state, to)
        assert raised.value.code == code
    world.state.peers.clear()
    with pytest.raises(ClientError) as raised:
        resolve_peer(world.state, None)
    assert raised.value.code == "not_paired"


def test_last_seq_is_saved_beside_the_state_without_changing_it(world: World) -> None:
    assert load_last_seq(world.path) is None
    save_last_seq(world.path, "computer-1", 42)
    assert load_last_seq(world.path) == 42
    assert stat.S_IMODE(world.path.stat().st_mode) == 0o600
    assert DeviceState.load(world.path).to_json() == world.state.to_json()
    save_last_seq(world.path, "someone-else", 50)  # the file now holds another device: untouched
    assert load_last_seq(world.path) == 42
    world.path.write_text('{"last_seq": -1}')
    assert load_last_seq(world.path) is None
    assert load_last_seq(world.path.with_name("absent.json")) is None


def test_the_position_is_written_at_most_once_per_interval_and_on_flush(world: World) -> None:
    now = [0.0]
    position = Position(world.path, "computer-1", None, interval=1.0, clock=lambda: now[0])
    position.advance(1)
    assert load_last_seq(world.path) is None
    now[0] = 1.5
    position.advance(2)
    assert load_last_seq(world.path) == 2
    position.advance(3)
    assert load_last_seq(world.path) == 2
    position.flush()
    assert load_last_seq(world.path) == 3


# The commands, against the scripted server.


@pytest.fixture
def scripted_world(world: World) -> Iterator[tuple[World, ScriptedSync]]:
    clip = {"type": "clipboard", "text": "one"}
    frames = [
        ": relaybox stream\n\n",
        frame(
            11,
            json.dumps(
                {
                    "seq": 11,
                    "from": "phone-1",
                    "type": "clipboard",
                    "blob": sealed(clip, world.phone, world.me),
                }
            ),
        ),
        frame(12, json.dumps({"seq": 12, "from": "phone-1", "type": "clipboard", "blob": "AQ=="})),
        frame(
            13,
            json.dumps(
                {
                    "seq": 13,
                    "from": "server",
                    "type": "token_update",
                    "blob": sealed(TOKENS, world.server, world.me),
                }
            ),
            event="token_update",
        ),
    ]
    app = ScriptedSync(Stream(frames, end="hang"))
    with serve_in_thread(app) as url:
        world.state.server = url
        world.state.save(world.path)
        yield world, app


def test_tail_once_prints_each_event_and_resumes_after_the_last_one(
    scripted_world: tuple[World, ScriptedSync], capsys: pytest.CaptureFixture[str]
) -> None:
    world, app = scripted_world
    assert main(["tail", "--once", "--idle", str(IDLE_S), "--state", str(world.path)]) == 0
    out, err = capsys.readouterr()
    assert out == "[seq 11] clipboard from Pixel: one\n[seq 13] tokens now: cron (phone:control), backup\n"
    assert (
        "warning: dropped seq 12 (envelope from phone-1): cannot open the envelope (EnvelopeTooShort" in err
    )
    assert load_last_seq(world.path) == 13
    assert main(["tail", "--once", "--json", "--idle", str(IDLE_S), "--state", str(world.path)]) == 0
    assert capsys.readouterr().out == ""
    assert app.requests[1]["last-event-id"] == "13"
    assert (
        main(["tail", "--once", "--json", "--since", "12", "--idle", str(IDLE_S), "--state", str(world.path)])
        == 0
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        {"seq": 13, "event": "token_update", "from": "server", "type": "token_update", "payload": TOKENS}
    ]
    assert app.requests[2]["last-event-id"] == "12"


def test_phone_run_refuses_a_computer_state(
    scripted_world: tuple[World, ScriptedSync], capsys: pytest.CaptureFixture[str]
) -> None:
    world, app = scripted_world
    assert main(["phone", "run", "--once", "--state", str(world.path)]) == 1
    assert capsys.readouterr().err.startswith("error: wrong_role: ")
    assert app.requests == []


def test_send_errors_are_one_line_before_anything_is_sent(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.state.peers["laptop-2"] = Peer("Desk", "cli", world.state.peers["phone-1"].public_key, "p2")
    world.state.role = "phone"
    world.state.save(world.path)
    assert main(["phone", "send", "hi", "--state", str(world.path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: peer_required: several paired devices (")
    assert "Pixel [phone-1]" in err and "Desk [laptop-2]" in err and "--to" in err
    assert err.count("\n") == 1
    assert main(["send-text", "hi", "--state", str(world.path)]) == 1
    assert capsys.readouterr().err.startswith("error: wrong_role: ")
    assert main(["send-text", "hi", "--state", str(world.path.with_name("absent.json"))]) == 1
    assert capsys.readouterr().err.startswith("error: no_state: ")


HELP: list[tuple[list[str], list[str]]] = [
    (["tail"], ["--state", "--since", "--json", "--once", "--idle", "last_seq"]),
    (["phone", "run"], ["--state", "--since", "--json", "--once", "--idle"]),
    (["phone", "send"], ["TEXT", "--to", "--state"]),
    (["send-text"], ["TEXT", "--state"]),
]


@pytest.mark.parametrize(("command", "words"), HELP, ids=[" ".join(c) for c, _ in HELP])
def test_the_stream_commands_explain_themselves(
    command: list[str], words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: relaybox {' '.join(command)}")
    assert all(word in out for word in words)
    assert len(out.split("\n\n")[1].split()) >= 10
