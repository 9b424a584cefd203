"""The virtual phone's operations (``client.phone_ops`` and the reminders, questions and documents
modules it wires) without a real server: the reminder scheduler on an injected clock, cancels,
questions and the choice of answer, the ring, and documents pulled from a fake API, re-sanitized
and saved without replacing anything."""

from __future__ import annotations

import base64
import errno
import io
import json
import os
import queue
import re
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from app.cli import main
from client import phone
from client.dispatch import default_dispatcher
from client.documents import DocumentError, numbered_names, safe_filename, save_document
from client.opener import Opener, Received
from client.output import Output
from client.phone_ops import PhoneOps
from client.position import load_last_seq, save_last_seq
from client.question_parsing import Question, Reply, choose, parse_answer_line, parse_question
from client.reminder_ledger import ReminderLedger
from client.reminder_schedule import Reminder, ReminderQueue, ReminderScheduler
from client.reminders import load_reminders, save_reminders
from client.sse import SseEvent, SseParser
from client.state import ClientError, DeviceState
from client.state_file import update_fields
from client.sync_follower import KeepAlive, SyncEvent, SyncFollower
from core.domain.canonical import canonical_json
from core.domain.envelope import seal
from core.domain.keys import b64encode, generate_keypair
from tests.live import serve_in_thread

WAIT_S = 5.0  # the most any wait for a background thread may take; normally milliseconds
SERVER_URL = "http://relaybox.test"


# Fixtures: a phone's state, captured output, a fake API.


@dataclass(frozen=True)
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


@pytest.fixture
def world(tmp_path: Path) -> World:
    me, server = Keys.new(), Keys.new()
    state = DeviceState(
        server=SERVER_URL,
        role="phone",
        device_id="phone-1",
        device_token="dev_token",
        secret_key=b64encode(me.secret),
        public_key=b64encode(me.public),
        server_public_key=b64encode(server.public),
        name="Pixel",
    )
    path = tmp_path / "phone.json"
    state.save(path)
    return World(path, state, me, server)


class Capture(io.StringIO):
    """A stream threads write to; a test waits on it for some text (bounded)."""

    def __init__(self, *, tty: bool = False) -> None:
        super().__init__()
        self._tty = tty
        self._changed = threading.Condition()

    def isatty(self) -> bool:
        return self._tty

    def write(self, text: str) -> int:
        with self._changed:
            written = super().write(text)
            self._changed.notify_all()
            return written

    def wait_for(self, text: str, timeout: float = WAIT_S) -> str:
        with self._changed:
            if not self._changed.wait_for(lambda: text in self.getvalue(), timeout):
                pytest.fail(f"{text!r} was not written within {timeout} s; got {self.getvalue()!r}")
            return self.getvalue()

    def lines(self) -> list[str]:
        return self.getvalue().splitlines()

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines()]


@dataclass
class Screen:
    output: Output
    out: Capture
    err: Capture


def screen(*, as_json: bool = False, tty: bool = False) -> Screen:
    out, err = Capture(tty=tty), Capture(tty=tty)
    return Screen(Output(as_json=as_json, stdout=out, stderr=err), out, err)


def error_body(code: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": f"refused: {code}"}}


@dataclass
class FakeApi:
    """The two phone routes: answers (200 unless ``refuse`` names a code) and parked documents."""

    refuse: dict[str, tuple[int, str]] = field(default_factory=dict)
    documents: dict[str, str] = field(default_factory=dict)
    requests: list[httpx.Request] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = re.fullmatch(r"/v1/interactions/([^/]+)/answer", request.url.path)
        document = re.fullmatch(r"/v1/documents/([^/]+)", request.url.path)
        if answer and request.method == "POST":
            if answer[1] in self.refuse:
                status, code = self.refuse[answer[1]]
                return httpx.Response(status, json=error_body(code))
            index = json.loads(request.content)["choice_index"]
            return httpx.Response(200, json={"id": answer[1], "status": "answered", "choice_index": index})
        if document and request.method == "GET" and document[1] in self.documents:
            return httpx.Response(
                200, json={"document_id": document[1], "blob": self.documents.pop(document[1])}
            )
        return httpx.Response(404, json=error_body("not_found"))

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)


class OpsFactory(Protocol):
    def __call__(self, shown: Screen, api: FakeApi | None = None, **options: Any) -> PhoneOps: ...


@pytest.fixture
def new_ops(world: World) -> Iterator[OpsFactory]:
    """``PhoneOps`` for ``world`` over a fake API; every one is closed at teardown."""
    made: list[PhoneOps] = []

    def make(shown: Screen, api: FakeApi | None = None, **options: Any) -> PhoneOps:
        transport = (api or FakeApi()).transport
        made.append(PhoneOps(world.path, world.state, shown.output, transport=transport, **options))
        return made[-1]

    yield make
    for ops in made:
        ops.close()


def live_push(push_type: str, inline: dict[str, Any] | None = None, **fields: str) -> Received:
    return Received(0, "push", "server", "server", push_type, {"msgId": "msg_1", **fields}, inline, live=True)


# The reminder queue and scheduler.


def test_the_queue_hands_out_due_reminders_in_time_order_skipping_replaced_and_cancelled() -> None:
    reminders = ReminderQueue()
    reminders.arm(Reminder("rmd_a", 30, "a"))
    reminders.arm(Reminder("rmd_b", 10, "b"))
    reminders.arm(Reminder("rmd_c", 20, "c"))
    reminders.arm(Reminder("rmd_b", 25, "b moved"))  # the same id again: replaced
    reminders.arm(Reminder("rmd_d", 30, "d"))
    assert reminders.cancel("rmd_c") == Reminder("rmd_c", 20, "c")
    assert reminders.cancel("rmd_unknown") is None
    assert len(reminders) == 3
    assert reminders.next_due() == 25
    assert reminders.pop_due(24.9) == []
    assert reminders.pop_due(30) == [
        Reminder("rmd_b", 25, "b moved"),
        Reminder("rmd_a", 30, "a"),
        Reminder("rmd_d", 30, "d"),
    ]
    assert reminders.next_due() is None and reminders.armed() == []


def test_the_scheduler_fires_each_reminder_when_the_injected_clock_reaches_it() -> None:
    now = [100.0]
    fired: queue.Queue[Reminder] = queue.Queue()
    saved: list[list[str]] = []
    scheduler = ReminderScheduler(
        fired.put, clock=lambda: now[0], on_change=lambda armed: saved.append([r.reminder_id for r in armed])
    )
    with scheduler:
        scheduler.arm(Reminder("rmd_later", 160, "later"))
        scheduler.arm(Reminder("rmd_soon", 130, "soon"))
        scheduler.arm(Reminder("rmd_due", 100, "due now"))
        assert fired.get(timeout=WAIT_S).reminder_id == "rmd_due"
        assert [r.reminder_id for r in scheduler.armed()] == ["rmd_soon", "rmd_later"]
        assert fired.empty()  # nothing else is due at 100
        now[0] = 130.0
        scheduler.poke()
        assert fired.get(timeout=WAIT_S).reminder_id == "rmd_soon"
        now[0] = 1000.0
        scheduler.poke()
        assert fired.get(timeout=WAIT_S).reminder_id == "rmd_later"
    assert scheduler.armed() == []
    # Each change is saved (the thread may already have fired rmd_due when its arming is saved).
    assert saved[:2] == [["rmd_later"], ["rmd_soon", "rmd_later"]]
    assert ["rmd_later"] in saved[2:] and saved[-1] == []


def test_a_failing_reminder_does_not_stop_the_scheduler() -> None:
    fired: queue.Queue[str] = queue.Queue()
    errors: list[Exception] = []

    def fire(reminder: Reminder) -> None:
        if reminder.message == "boom":
            raise OSError(errno.EPIPE, "Broken pipe")
        fired.put(reminder.message)

    with ReminderScheduler(fire, clock=lambda: 50.0, on_error=errors.append) as scheduler:
        scheduler.arm(Reminder("rmd_1", 10, "boom"))
        scheduler.arm(Reminder("rmd_2", 20, "fine"))
        assert fired.get(timeout=WAIT_S) == "fine"
    assert [type(error) for error in errors] == [BrokenPipeError]


def test_cancelling_an_unknown_id_changes_and_saves_nothing() -> None:
    saved: list[list[Reminder]] = []
    scheduler = ReminderScheduler(lambda _r: None, clock=lambda: 0.0, on_change=saved.append)
    scheduler.restore([Reminder("rmd_1", 10, "kept")])
    assert scheduler.cancel("rmd_unknown") is None
    assert saved == [] and scheduler.armed() == [Reminder("rmd_1", 10, "kept")]
    scheduler.close()  # never started: nothing to join


def test_reminders_are_armed_from_pushes_kept_in_the_state_and_cancelled(
    world: World, new_ops: OpsFactory
) -> None:
    shown = screen()
    ops = new_ops(shown, clock=lambda: 1_000.0)
    dispatcher = phone.run_dispatcher(world.path, ops)
    with ops:
        push = live_push(
            "reminder", {"type": "reminder", "reminder_id": "rmd_1", "fire_at": 5_000, "message": "tea"}
        )
        assert dispatcher.describe(push) == ""
        assert load_reminders(world.path, "phone-1") == [Reminder("rmd_1", 5_000, "tea")]

        unknown = live_push("reminder_cancel", {"type": "reminder_cancel", "reminder_id": "rmd_nope"})
        assert dispatcher.describe(unknown) == ""  # ignored silently
        assert shown.out.lines() == ["REMINDER SET [rmd_1] for 1970-01-01 01:23:20 UTC: tea"]

        cancel = live_push("reminder_cancel", {"type": "reminder_cancel", "reminder_id": "rmd_1"})
        assert dispatcher.describe(cancel) == ""
        assert shown.out.lines()[-1] == "REMINDER CANCELLED [rmd_1]: tea"
        assert "reminders" not in json.loads(world.path.read_text())

        odd = live_push("reminder", {"type": "reminder", "reminder_id": "rmd_2", "message": "no time"})
        assert (
            dispatcher.describe(odd)
            == "[live] reminder push that cannot be read: fire_at is missing or not a whole number"
        )
        assert (
            dispatcher.describe(live_push("reminder"))
            == "[live] reminder push that cannot be read: it carries no payload"
        )
    assert shown.err.getvalue() == ""


def queued_payload(payload_type: str, payload: dict[str, Any], seq: int) -> Received:
    """An envelope from the phone's queue, as ``relaybox phone run`` sees it once opened."""
    return Received(seq, "envelope", "server", "server", payload_type, {"type": payload_type, **payload})


def test_a_cancel_that_comes_before_its_set_is_remembered_and_the_set_never_arms(
    world: World, new_ops: OpsFactory
) -> None:
    shown = screen()
    now = [1_000.0]
    ops = new_ops(shown, clock=lambda: now[0])
    dispatcher = phone.run_dispatcher(world.path, ops)
    with ops:
        assert dispatcher.describe(queued_payload("reminder_cancel", {"reminder_id": "rmd_1"}, 1)) == ""
        assert (
            dispatcher.describe(
                queued_payload("reminder", {"reminder_id": "rmd_1", "fire_at": 5_000, "message": "tea"}, 2)
            )
            == ""
        )
        assert ops.reminders.armed() == []
        assert shown.out.lines() == []
        assert "rmd_1 was cancelled already: not armed" in shown.err.getvalue()
    # Remembered in the state file: another run refuses the replayed set too.
    settled = json.loads(world.path.read_text())["reminders_settled"]
    assert settled["rmd_1"]["state"] == "cancelled"
    assert settled["rmd_1"]["until"] == 1_000 + 365 * 86_400 + 86_400
    later = new_ops(screen(), clock=lambda: now[0])
    with later:
        later.reminders.on_reminder(
            queued_payload("reminder", {"reminder_id": "rmd_1", "fire_at": 5_000, "message": "tea"}, 2)
        )
        assert later.reminders.armed() == []


def test_a_set_replayed_after_it_fired_or_twice_is_armed_once(world: World, new_ops: OpsFactory) -> None:
    shown = screen(as_json=True)
    now = [1_000.0]
    ops = new_ops(shown, clock=lambda: now[0])
    dispatcher = phone.run_dispatcher(world.path, ops)
    reminder = queued_payload("reminder", {"reminder_id": "rmd_1", "fire_at": 1_010, "message": "tea"}, 1)
    with ops:
        dispatcher.describe(reminder)
        dispatcher.describe(reminder)  # the same set again, while armed
        assert len(ops.reminders.armed()) == 1
        now[0] = 1_010.0
        ops.reminders.scheduler.poke()
        shown.out.wait_for('"fired_at"')
        dispatcher.describe(reminder)  # replayed after it fired
        assert ops.reminders.armed() == []
    kinds = [json.loads(line)["type"] for line in shown.out.lines()]
    assert kinds == ["reminder_set", "reminder"]
    assert json.loads(world.path.read_text())["reminders_settled"]["rmd_1"] == {
        "state": "fired",
        "until": 1_010 + 86_400,
    }


def test_settled_ids_are_forgotten_once_their_set_can_no_longer_arrive(world: World) -> None:
    now = [1_000.0]
    ledger = ReminderLedger(world.path, "phone-1", clock=lambda: now[0])
    ledger.record("rmd_1", "fired", fire_at=1_500)
    assert ledger.settled("rmd_1") == "fired"
    now[0] = 1_500 + 86_400
    assert ledger.settled("rmd_1") is None
    ledger.record("rmd_2", "cancelled", fire_at=None)  # the next write drops the forgotten one
    assert set(json.loads(world.path.read_text())["reminders_settled"]) == {"rmd_2"}


def test_after_a_restart_a_passed_reminder_fires_at_once_and_a_later_one_stays_armed(
    world: World, new_ops: OpsFactory
) -> None:
    save_reminders(
        world.path, "phone-1", [Reminder("rmd_missed", 100, "missed it"), Reminder("rmd_next", 9_000, "next")]
    )
    shown = screen(as_json=True)
    with new_ops(shown, clock=lambda: 1_000.0) as ops:
        shown.out.wait_for("missed it")
        assert [r.reminder_id for r in ops.reminders.armed()] == ["rmd_next"]
    assert shown.out.records() == [
        {
            "type": "reminder",
            "reminder_id": "rmd_missed",
            "fire_at": 100,
            "message": "missed it",
            "fired_at": 1000.0,
        }
    ]
    assert "re-armed 2 reminders" in shown.err.getvalue()
    assert "rmd_missed was due 1970-01-01 00:01:40 UTC" in shown.err.getvalue()
    assert load_reminders(world.path, "phone-1") == [Reminder("rmd_next", 9_000, "next")]


def test_the_state_file_keeps_reminders_and_the_position_for_the_same_device_only(world: World) -> None:
    save_reminders(world.path, "phone-1", [Reminder("rmd_1", 10, "x")])
    save_last_seq(world.path, "phone-1", 7)
    world.state.name = "renamed"
    world.state.save(world.path)  # e.g. `phone pair` while `phone run` runs
    assert load_reminders(world.path, "phone-1") == [Reminder("rmd_1", 10, "x")]
    assert load_last_seq(world.path) == 7
    assert stat.S_IMODE(world.path.stat().st_mode) == 0o600
    assert not update_fields(world.path, "someone-else", {"reminders": None})
    assert update_fields(world.path, "phone-1", {"reminders": None})
    assert load_reminders(world.path, "phone-1") == []
    world.state.device_id = "phone-2"  # a new device replaces the file: nothing carried over
    world.state.save(world.path)
    assert load_last_seq(world.path) is None


def test_malformed_kept_reminders_are_skipped(world: World) -> None:
    update_fields(
        world.path,
        "phone-1",
        {"reminders": {"rmd_ok": {"fire_at": 5, "message": "ok"}, "rmd_bad": {"fire_at": "soon"}, "x y": 3}},
    )
    assert load_reminders(world.path, "phone-1") == [Reminder("rmd_ok", 5, "ok")]
    assert load_reminders(world.path, "someone-else") == []


# Live pushes on the stream.


def test_a_push_without_an_id_line_is_live_and_never_moves_the_position(world: World) -> None:
    parser = SseParser()
    items = parser.feed('id: 4\nevent: envelope\ndata: {}\n\nevent: push\ndata: {"type":"ring"}\n\n')
    assert [(item.id, item.own_id) for item in items if isinstance(item, SseEvent)] == [
        ("4", True),
        ("4", False),
    ]

    ring = json.dumps({"type": "ring", "durationS": "60"})
    frames = [
        ": relaybox stream",
        "id: 4\nevent: push\ndata: {}",
        f"event: push\ndata: {ring}",
        "id: 5\nevent: push\ndata: {}",
    ]
    body = "".join(f"{frame}\n\n" for frame in frames)

    def sync(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body.encode())

    events: list[SyncEvent] = []
    with SyncFollower(SERVER_URL, "dev_token", transport=httpx.MockTransport(sync)) as follower:
        for item in follower.events():
            if not isinstance(item, KeepAlive):
                events.append(item)
            if len(events) == 3:
                break
        assert follower.last_seq == 5
    assert [(event.seq, event.live) for event in events] == [(4, False), (4, True), (5, False)]

    opened = Opener(world.path, world.state).open(events[1])
    assert isinstance(opened, Received) and opened.live
    assert opened.to_json() == {
        "seq": None,
        "event": "push",
        "from": "server",
        "type": "ring",
        "payload": {"durationS": "60"},
        "live": True,
    }
    assert default_dispatcher().describe(opened) == '[live] push ring from server: durationS="60"'


# Ring.


def test_a_ring_prints_its_duration_and_sounds_the_bell(world: World, new_ops: OpsFactory) -> None:
    shown = screen(tty=True)
    dispatcher = phone.run_dispatcher(world.path, new_ops(shown))
    assert dispatcher.describe(live_push("ring", durationS="30")) == ""
    assert shown.out.getvalue() == "RING for 30 s\n\a"
    as_json = screen(as_json=True, tty=True)
    phone.run_dispatcher(world.path, new_ops(as_json)).describe(live_push("ring", durationS="30"))
    assert as_json.out.records() == [{"type": "ring", "duration_s": 30}]
    assert as_json.err.getvalue() == "\a"  # the bell never goes into the JSON lines


# Questions and answers.


QUESTION = {
    "type": "interaction_request",
    "id": "int_1",
    "question": "Deploy\nnow?",
    "choices": ["Yes", "No"],
    "expires_at": 2_000,
}


def asked(payload: dict[str, Any] = QUESTION) -> Received:
    return Received(7, "envelope", "server", "server", "interaction_request", dict(payload))


def test_answer_lines_pick_the_newest_question_or_the_one_named() -> None:
    first = Question("int_1", "A?", ("Yes", "No"), 2_000)
    second = Question("int_2", "B?", ("Red", "Green", "Blue"), 2_000)
    pending = [first, second]
    assert parse_answer_line(" 2 ", pending) == (second, Reply(2))
    assert parse_answer_line("int_1 1", pending) == (first, Reply(1))
    for text, code in [
        ("int_1 2", "invalid_choice"),
        ("3", "invalid_choice"),
        ("-1", "invalid_answer"),
        ("yes", "invalid_answer"),
        ("int_9 0", "unknown_question"),
        ("int_1 1 extra", "invalid_answer"),
    ]:
        with pytest.raises(ClientError) as raised:
            parse_answer_line(text, pending)
        assert raised.value.code == code, text
    with pytest.raises(ClientError, match="no open question"):
        parse_answer_line("0", [])
    assert choose(1, first) == 1
    with pytest.raises(ClientError, match="choose 0 to 1"):
        choose(2, first)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"choices": []}, "choices"),
        ({"choices": ["Yes", 2]}, "choices"),
        ({"id": "../x"}, "id is missing"),
        ({"question": ""}, "question is missing"),
        ({"expires_at": True}, "expires_at"),
    ],
)
def test_an_unreadable_question_is_reported_not_answered(change: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_question(QUESTION | change)


def test_with_answer_n_every_question_is_answered_with_choice_n(world: World, new_ops: OpsFactory) -> None:
    api = FakeApi(refuse={"int_2": (409, "already_answered")})
    shown = screen()
    dispatcher = phone.run_dispatcher(world.path, new_ops(shown, api, answer=1))
    assert dispatcher.describe(asked()) == ""
    assert shown.out.lines() == [
        "QUESTION [int_1]: Deploy\\nnow?",
        "  [0] Yes",
        "  [1] No",
        "ANSWERED [int_1] 1 (No)",
    ]
    request = api.requests[0]
    assert (request.method, request.url.path) == ("POST", "/v1/interactions/int_1/answer")
    assert json.loads(request.content) == {"choice_index": 1}
    assert request.headers["authorization"] == "Bearer dev_token"

    dispatcher.describe(asked(QUESTION | {"id": "int_2"}))
    assert shown.out.lines()[-1] == "ANSWER FAILED [int_2] 1: already_answered: refused: already_answered"
    three = screen()
    phone.run_dispatcher(world.path, new_ops(three, api, answer=3)).describe(asked())
    assert three.out.lines()[-1].startswith("ANSWER FAILED [int_1] 3: invalid_choice: ")
    assert len(api.requests) == 2  # the impossible choice was never sent


def test_in_json_mode_the_question_and_answer_are_records(world: World, new_ops: OpsFactory) -> None:
    shown = screen(as_json=True)
    phone.run_dispatcher(world.path, new_ops(shown, answer=0)).describe(asked())
    question, answered = shown.out.records()
    assert question == {
        "type": "question",
        "interaction_id": "int_1",
        "question": "Deploy\nnow?",
        "choices": ["Yes", "No"],
        "expires_at": 2_000,
    }
    assert {k: answered[k] for k in ("type", "interaction_id", "choice_index", "choice", "status")} == {
        "type": "answered",
        "interaction_id": "int_1",
        "choice_index": 0,
        "choice": "Yes",
        "status": "answered",
    }
    assert answered["sent_at"] <= answered["at"]


def test_without_answer_or_terminal_the_question_is_only_shown(world: World, new_ops: OpsFactory) -> None:
    api = FakeApi()
    shown = screen()
    phone.run_dispatcher(world.path, new_ops(shown, api)).describe(asked())
    assert shown.out.lines()[-1] == "  [1] No"
    assert shown.err.getvalue() == "answer with: relaybox phone answer int_1 N\n"
    assert api.requests == []


def test_answers_typed_at_the_terminal_are_sent(world: World, new_ops: OpsFactory) -> None:
    api = FakeApi()
    shown = screen()
    read_end, write_end = os.pipe()
    ops = new_ops(shown, api, interactive=True, stdin_fd=read_end, clock=lambda: 1_000.0)
    try:
        with ops:
            phone.run_dispatcher(world.path, ops).describe(asked())
            assert "answer: type a choice number (choose 0 to 1) and Enter" in shown.err.getvalue()
            os.write(write_end, b"5\n0\n")
            shown.out.wait_for("ANSWERED [int_1] 0 (Yes)")
            assert ops.questions.open_questions() == []
            os.write(write_end, b"0\n")
            shown.err.wait_for("error: no_question: ")
    finally:
        os.close(write_end)
        assert ops.questions.reader is not None
        ops.questions.reader.join(WAIT_S)
        os.close(read_end)
    assert not ops.questions.reader.is_alive()
    assert "error: invalid_choice: 5 is not a choice of int_1 (choose 0 to 1)" in shown.err.getvalue()
    assert [json.loads(r.content) for r in api.requests] == [{"choice_index": 0}]


def test_an_expired_question_is_no_longer_open(world: World, new_ops: OpsFactory) -> None:
    ops = new_ops(screen(), interactive=True, stdin_fd=-1, clock=lambda: 2_000.0)
    ops.questions.on_question(asked())
    assert ops.questions.open_questions() == []  # expires_at 2000 is not after now


def test_phone_answer_reports_the_servers_refusal_as_one_line(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    api = FakeApi(refuse={"int_2": (409, "interaction_expired")})
    answered = phone.answer(world.path, "int_1", 1, transport=api.transport)
    assert (answered.interaction_id, answered.status, answered.choice_index) == ("int_1", "answered", 1)

    async def refuse(request: Request) -> JSONResponse:
        return JSONResponse(error_body("already_answered"), status_code=409)

    app = Starlette(routes=[Route("/v1/interactions/{interaction_id}/answer", refuse, methods=["POST"])])
    with serve_in_thread(app) as url:
        world.state.server = url
        world.state.save(world.path)
        assert main(["phone", "answer", "int_1", "0", "--state", str(world.path)]) == 1
    err = capsys.readouterr().err
    assert err == "error: already_answered: refused: already_answered\n"
    with pytest.raises(ClientError) as raised:
        phone.answer(world.path, "../../v1/tokens", 0, transport=api.transport)
    assert raised.value.code == "invalid_id"


@pytest.mark.parametrize(
    ("command", "words"),
    [
        (["phone", "run"], ["--answer", "--downloads", "REMINDER", "QUESTION"]),
        (["phone", "answer"], ["INTERACTION_ID", "N", "--state"]),
    ],
    ids=["phone run", "phone answer"],
)
def test_the_commands_explain_the_phone_operations(
    command: list[str], words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert all(word in out for word in words)


# Documents.


def sealed_document(world: World, document_id: str, filename: str, content: str) -> str:
    payload = {"type": "document", "document_id": document_id, "filename": filename, "content": content}
    return base64.b64encode(seal(canonical_json(payload), world.server.secret, world.me.public)).decode()


def document_push(document_id: str) -> Received:
    return Received(9, "push", "server", "server", "document", {"documentId": document_id})


@pytest.fixture
def downloads(tmp_path: Path) -> Path:
    return tmp_path / "Downloads"


def test_a_document_is_pulled_decrypted_and_saved_without_replacing_a_file(
    world: World, downloads: Path, new_ops: OpsFactory
) -> None:
    api = FakeApi(
        documents={
            "doc_1": sealed_document(world, "doc_1", "notes.md", "# héllo\n"),
            "doc_2": sealed_document(world, "doc_2", "notes.md", "second"),
        }
    )
    downloads.mkdir()
    (downloads / "notes.md").write_text("mine")
    shown = screen()
    dispatcher = phone.run_dispatcher(world.path, new_ops(shown, api, downloads=downloads))
    assert dispatcher.describe(document_push("doc_1")) == ""
    assert dispatcher.describe(document_push("doc_2")) == ""
    assert shown.out.lines() == [f"SAVED {downloads / 'notes (1).md'}", f"SAVED {downloads / 'notes (2).md'}"]
    assert (downloads / "notes.md").read_text() == "mine"
    assert (downloads / "notes (1).md").read_text(encoding="utf-8") == "# héllo\n"
    assert (downloads / "notes (2).md").read_text() == "second"
    assert sorted(p.name for p in downloads.iterdir()) == ["notes (1).md", "notes (2).md", "notes.md"]
    assert [(r.method, r.url.path, r.headers["authorization"]) for r in api.requests] == [
        ("GET", "/v1/documents/doc_1", "Bearer dev_token"),
        ("GET", "/v1/documents/doc_2", "Bearer dev_token"),
    ]


def test_documents_go_into_the_phones_folder_of_the_users_downloads_by_default_and_json_names_the_path(
    world: World, new_ops: OpsFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DOWNLOAD_DIR", str(tmp_path / "my downloads"))
    api = FakeApi(documents={"doc_1": sealed_document(world, "doc_1", "../../report.csv", "a,b\n")})
    shown = screen(as_json=True)
    phone.run_dispatcher(world.path, new_ops(shown, api)).describe(document_push("doc_1"))
    path = tmp_path / "my downloads" / "relaybox-phone" / "report.csv"  # the separators were stripped again
    assert shown.out.records() == [
        {"type": "saved", "document_id": "doc_1", "filename": "report.csv", "path": str(path)}
    ]
    assert path.read_text() == "a,b\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize("filename", ["page.html", "../../.bashrc", "run.exe", "x" * 130 + ".txt", ".md"])
def test_an_unsafe_filename_is_refused_and_nothing_is_written(
    world: World, downloads: Path, filename: str, new_ops: OpsFactory
) -> None:
    api = FakeApi(documents={"doc_1": sealed_document(world, "doc_1", filename, "<script>")})
    shown = screen()
    phone.run_dispatcher(world.path, new_ops(shown, api, downloads=downloads)).describe(
        document_push("doc_1")
    )
    assert shown.out.lines()[0].startswith("DOCUMENT REFUSED [doc_1]: unsafe_filename: refused ")
    assert not downloads.exists()


def test_documents_that_cannot_be_pulled_or_opened_are_reported(
    world: World, downloads: Path, new_ops: OpsFactory
) -> None:
    stranger = Keys.new()
    wrong_key = base64.b64encode(seal(b'{"type":"document"}', stranger.secret, world.me.public)).decode()
    api = FakeApi(
        documents={
            "doc_wrong_key": wrong_key,
            "doc_other": sealed_document(world, "doc_else", "a.txt", "x"),
            "doc_not_base64": "%%%",
        }
    )
    shown = screen()
    dispatcher = phone.run_dispatcher(world.path, new_ops(shown, api, downloads=downloads))
    for document_id in ["doc_gone", "doc_wrong_key", "doc_other", "doc_not_base64"]:
        assert dispatcher.describe(document_push(document_id)) == ""
    assert [line.split(":")[0] + ":" + line.split(":")[1] for line in shown.out.lines()] == [
        "DOCUMENT FAILED [doc_gone]: not_found",
        "DOCUMENT FAILED [doc_wrong_key]: unreadable_document",
        "DOCUMENT FAILED [doc_other]: unreadable_document",
        "DOCUMENT FAILED [doc_not_base64]: unreadable_document",
    ]
    assert "EnvelopeOpenFailed" in shown.out.lines()[1]
    assert (
        dispatcher.describe(document_push("../x"))
        == "[seq 9] document push without a usable documentId: '../x'"
    )
    assert not downloads.exists()


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("notes.md", "notes.md"),
        ("../../etc/notes.txt", "etcnotes.txt"),
        ("..\\..\\x.json", "x.json"),
        ("  .hidden.yaml ", "hidden.yaml"),
        ("tab\tand\nnewline.log", "tabandnewline.log"),
        ("Report.CSV", "Report.CSV"),
    ],
)
def test_filenames_are_sanitized_again_on_the_phone(raw: str, safe: str) -> None:
    assert safe_filename(raw) == safe


def test_numbered_names_keep_the_extension() -> None:
    assert list(numbered_names("a.b.md", 2)) == ["a.b.md", "a.b (1).md", "a.b (2).md"]
    assert list(numbered_names("README", 1)) == ["README", "README (1)"]


def test_saving_never_replaces_a_file_or_follows_a_link_even_without_hard_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "Downloads"
    folder.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("do not touch")
    (folder / "x.txt").symlink_to(outside)

    def no_hard_links(source: object, target: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    assert save_document(folder, "x.txt", "one") == folder / "x (1).txt"
    monkeypatch.setattr(os, "link", no_hard_links)
    assert save_document(folder, "x.txt", "two") == folder / "x (2).txt"
    assert outside.read_text() == "do not touch"
    assert (folder / "x (1).txt").read_text() == "one" and (folder / "x (2).txt").read_text() == "two"
    assert sorted(p.name for p in folder.iterdir()) == ["x (1).txt", "x (2).txt", "x.txt"]  # no temporaries
    for name in ["../x.txt", "a/b.txt", ".."]:
        with pytest.raises(DocumentError):
            save_document(folder, name, "no")


def test_a_full_folder_of_copies_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("client.documents.MAX_COPIES", 2)
    for name in ["n.txt", "n (1).txt", "n (2).txt"]:
        (tmp_path / name).write_text("taken")
    with pytest.raises(DocumentError) as raised:
        save_document(tmp_path, "n.txt", "new")
    assert raised.value.code == "no_free_name"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n (1).txt", "n (2).txt", "n.txt"]


@pytest.fixture(autouse=True)
def _no_threads_left_behind() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and t.name.startswith("relaybox-")]
    assert left == [], left
