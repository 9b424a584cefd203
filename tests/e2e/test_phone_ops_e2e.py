"""Acceptance: phone operations reach a real virtual phone (``relaybox phone run``) through a real
server — a question answered while the caller long-polls, reminders fired and cancelled on the
phone (also across a restart), a ring, and the document route refusing sender tokens."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import TRACEBACK, BackgroundCli, Cli, CliResult, RelayboxServer

pytestmark = pytest.mark.e2e

# Reminders may be set 2 s ahead here instead of 60 s.
# A ring lasts RING_S (60 s by default), which is also how long it waits for an offline phone.
RING_S = 4
SERVER_ENV = {
    "RELAYBOX_REMINDER_MIN_LEAD_S": "2",
    "RELAYBOX_RING_DURATION_S": str(RING_S),
}
LINE_TIMEOUT_S = 15.0
REMINDER_TIMEOUT_S = 10.0
HTTP_TIMEOUT_S = 40.0  # longer than the 30 s long poll
# The long poll must return within 100 ms of the answer. Both times are time.time() on this machine:
# the phone's is taken when its POST returned (so the answer is committed), the test's when the poll
# returned. 150 ms more are allowed for the phone printing its line and the threads being scheduled.
ANSWER_LATENCY_S = 0.1 + 0.15


@pytest.fixture
def relaybox_server(tmp_path: Path) -> Iterator[str]:
    """Overrides the conftest server: the same, started with ``SERVER_ENV``."""
    with RelayboxServer(tmp_path / "server", env=SERVER_ENV) as server:
        yield server.wait_until_ready()
    log = server.stderr()
    if TRACEBACK in log:
        pytest.fail(f"the server wrote a traceback to stderr:\n{log}")


def ok(result: CliResult) -> CliResult:
    assert result.returncode == 0, result
    assert "Traceback" not in result.stderr
    return result


@dataclass
class Phone:
    state: Path
    device_id: str
    token: str  # a sender token with scope phone:control
    http: httpx.Client  # the caller: the server's API with that token

    def post(self, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        return self.http.post(path, json=body)


@pytest.fixture
def phone(cli: Cli, tmp_path: Path) -> Iterator[Phone]:
    state = tmp_path / "phone.json"
    ok(cli.run("phone", "register", "--name", "Pixel", "--state", state))
    created = ok(
        cli.run("phone", "tokens", "create", "--label", "e2e", "--scope", "phone:control", "--state", state)
    )
    token = created.stdout.strip()
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(
        base_url=cli.server_url, headers=headers, timeout=HTTP_TIMEOUT_S, trust_env=False
    ) as http:
        yield Phone(state, json.loads(state.read_text())["device_id"], token, http)


def start_phone(cli: Cli, phone: Phone, *options: str) -> BackgroundCli:
    """``phone run --json`` with ``options``, once its stream is open: a notification sent after it
    started has arrived (ring and reminders only reach an open stream)."""
    run = cli.start("phone", "run", "--json", *options, "--state", phone.state)
    marker = f"stream check {time.monotonic_ns()}"
    assert phone.post("/v1/send", {"message": marker}).status_code == 200
    wait_for_record(run, lambda r: r.get("type") == "notification" and r["payload"]["message"] == marker)
    return run


Match = Callable[[dict[str, Any]], bool]


def wait_for_record(run: BackgroundCli, matches: Match, timeout: float = LINE_TIMEOUT_S) -> dict[str, Any]:
    """The next JSON line (skipping others) for which ``matches(record)`` is true."""
    deadline = time.monotonic() + timeout
    while True:
        line = run.wait_for_line(re.compile(r"^\{.*\}$"), max(0.01, deadline - time.monotonic()))[0]
        record: dict[str, Any] = json.loads(line)
        if matches(record):
            return record


def records(result: CliResult) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def stop(run: BackgroundCli) -> CliResult:
    """SIGTERM, as a service manager would; the phone exits 0."""
    assert run.process.poll() is None, run.close()
    run.process.terminate()
    return ok(run.finish())


def test_the_phone_answers_and_the_callers_long_poll_returns_at_once(cli: Cli, phone: Phone) -> None:
    asked = phone.post("/v1/interactions", {"question": "Deploy?", "choices": ["Wait", "Ship it"]})
    assert asked.status_code == 201, asked.text
    interaction_id = asked.json()["id"]

    polled: dict[str, Any] = {}

    def long_poll() -> None:
        started = time.time()
        response = phone.http.get(f"/v1/interactions/{interaction_id}", params={"wait": 30})
        polled.update(
            started=started, returned=time.time(), status=response.status_code, body=response.json()
        )

    poller = threading.Thread(target=long_poll, daemon=True)
    poller.start()
    # The phone starts only now (a second or so of start-up), so the poll is already waiting when the
    # question reaches it from the queue and it answers.
    run = cli.start("phone", "run", "--answer", "1", "--json", "--state", phone.state)
    question = wait_for_record(run, lambda r: r.get("type") == "question")
    assert question["interaction_id"] == interaction_id
    assert (question["question"], question["choices"]) == ("Deploy?", ["Wait", "Ship it"])
    answered = wait_for_record(run, lambda r: r.get("type") in ("answered", "answer_failed"))
    assert answered["type"] == "answered", answered
    poller.join(HTTP_TIMEOUT_S)
    assert not poller.is_alive()

    assert polled["status"] == 200
    assert (polled["body"]["status"], polled["body"]["choice_index"]) == ("answered", 1)
    assert (answered["interaction_id"], answered["choice_index"], answered["choice"]) == (
        interaction_id,
        1,
        "Ship it",
    )
    assert polled["started"] < answered["sent_at"] <= polled["returned"]  # the poll waited for it
    assert polled["returned"] - answered["at"] < ANSWER_LATENCY_S, (polled, answered)

    # A second answer is refused, from `phone answer` as from anywhere.
    again = cli.run("phone", "answer", interaction_id, "0", "--state", phone.state)
    assert again.returncode == 1 and again.stderr.startswith("error: already_answered: ")
    stop(run)

    # With the phone off, a question is answered later from the command line.
    later = phone.post("/v1/interactions", {"question": "Rollback?"}).json()["id"]
    done = ok(cli.run("phone", "answer", later, "0", "--state", phone.state))
    assert done.stdout == f"answered {later} with choice 0 (answered)\n"
    state = phone.http.get(f"/v1/interactions/{later}", params={"wait": 0}).json()
    assert (state["status"], state["choice_index"]) == ("answered", 0)


def set_reminder(phone: Phone, message: str, ahead_s: int) -> tuple[str, int]:
    fire_at = int(time.time()) + ahead_s
    response = phone.post("/v1/reminders", {"message": message, "at": fire_at})
    assert response.status_code == 201, response.text
    return response.json()["reminder_id"], fire_at


def fired(message: str) -> Match:
    return lambda r: r.get("type") == "reminder" and r["message"] == message


def test_reminders_fire_on_the_phone_unless_cancelled_also_after_a_restart(cli: Cli, phone: Phone) -> None:
    run = start_phone(cli, phone)

    reminder_id, fire_at = set_reminder(phone, "stand up", 3)
    armed = wait_for_record(run, lambda r: r.get("type") == "reminder_set")
    assert (armed["reminder_id"], armed["fire_at"], armed["message"]) == (reminder_id, fire_at, "stand up")
    record = wait_for_record(run, fired("stand up"), REMINDER_TIMEOUT_S)
    assert record["reminder_id"] == reminder_id
    assert fire_at <= record["fired_at"] < fire_at + 2

    cancelled_id, _ = set_reminder(phone, "never", 5)
    wait_for_record(run, lambda r: r.get("type") == "reminder_set" and r["reminder_id"] == cancelled_id)
    assert phone.http.delete(f"/v1/reminders/{cancelled_id}").status_code == 202
    assert phone.http.delete(f"/v1/reminders/rmd_{'0' * 32}").status_code == 202  # unknown: ignored
    set_reminder(phone, "after the cancelled one", 7)
    gone = wait_for_record(run, lambda r: r.get("type") == "reminder_cancelled")
    assert gone["reminder_id"] == cancelled_id
    wait_for_record(run, fired("after the cancelled one"), REMINDER_TIMEOUT_S)

    # Armed when the phone stops: kept in the state file, armed again by the next run.
    kept_id, kept_at = set_reminder(phone, "survives a restart", 4)
    wait_for_record(run, lambda r: r.get("type") == "reminder_set" and r["reminder_id"] == kept_id)
    first = stop(run)
    assert json.loads(phone.state.read_text())["reminders"] == {
        kept_id: {"fire_at": kept_at, "message": "survives a restart"}
    }
    again = cli.start("phone", "run", "--json", "--state", phone.state)
    record = wait_for_record(again, fired("survives a restart"), REMINDER_TIMEOUT_S)
    assert record["reminder_id"] == kept_id
    second = stop(again)

    everything = records(first) + records(second)
    assert [r["message"] for r in everything if r.get("type") == "reminder"] == [
        "stand up",
        "after the cancelled one",
        "survives a restart",
    ]
    assert [r["reminder_id"] for r in everything if r.get("type") == "reminder_cancelled"] == [cancelled_id]
    assert "re-armed 1 reminder" in second.stderr
    assert "reminders" not in json.loads(phone.state.read_text())  # fired: nothing left armed


def test_an_offline_phone_gets_set_then_cancel_from_its_queue_and_never_fires(cli: Cli, phone: Phone) -> None:
    """Issue 16: a reminder cancelled while the phone was offline fired anyway. Now the cancel deletes
    the queued set (the text is gone from the server) and is itself queued, so the phone, once it
    connects, remembers the cancel and never arms the reminder."""
    stop(start_phone(cli, phone))  # the phone has connected once, and is off now
    reminder_id, _ = set_reminder(phone, "cancelled while offline", 4)
    set_warnings = phone.post("/v1/reminders", {"message": "kept", "at": int(time.time()) + 5}).json()
    assert any("no open connection" in w for w in set_warnings["warnings"])
    cancelled = phone.http.delete(f"/v1/reminders/{reminder_id}")
    assert cancelled.status_code == 202 and any(
        "no open connection" in w for w in cancelled.json()["warnings"]
    )
    time.sleep(6)  # both fire times pass while the phone is off

    run = cli.start("phone", "run", "--json", "--state", phone.state)
    late = wait_for_record(run, fired("kept"), REMINDER_TIMEOUT_S)  # the other one still fires, late
    assert late["fired_at"] > late["fire_at"]
    marker = f"after the replay {time.monotonic_ns()}"
    assert phone.post("/v1/send", {"message": marker}).status_code == 200
    wait_for_record(run, lambda r: r.get("type") == "notification" and r["payload"]["message"] == marker)
    everything = records(stop(run))
    assert not [r for r in everything if r.get("reminder_id") == reminder_id]  # never set, never fired
    settled = json.loads(phone.state.read_text())["reminders_settled"]
    assert settled[reminder_id]["state"] == "cancelled"


def test_a_fired_reminder_replayed_from_the_queue_does_not_fire_again(cli: Cli, phone: Phone) -> None:
    run = start_phone(cli, phone)
    reminder_id, _ = set_reminder(phone, "once only", 3)
    wait_for_record(run, fired("once only"), REMINDER_TIMEOUT_S)
    stop(run)
    state = json.loads(phone.state.read_text())
    state.pop("last_seq", None)  # forget the stream position: the whole queue is replayed
    phone.state.write_text(json.dumps(state))
    again = cli.start("phone", "run", "--json", "--state", phone.state)
    marker = f"after the replay {time.monotonic_ns()}"
    assert phone.post("/v1/send", {"message": marker}).status_code == 200
    wait_for_record(again, lambda r: r.get("type") == "notification" and r["payload"]["message"] == marker)
    result = stop(again)
    assert not [r for r in records(result) if r.get("reminder_id") == reminder_id]
    assert f"reminder {reminder_id} was fired already: not armed" in result.stderr


def test_a_token_with_phone_control_rings_the_phone(cli: Cli, phone: Phone) -> None:
    run = start_phone(cli, phone)
    rung = phone.post(f"/v1/devices/{phone.device_id}/ring")
    assert rung.status_code == 202, rung.text
    assert wait_for_record(run, lambda r: r.get("type") == "ring") == {"type": "ring", "duration_s": RING_S}
    stop(run)

    text = cli.start("phone", "run", "--state", phone.state)  # text mode, as a person sees it
    marker = f"text check {time.monotonic_ns()}"
    assert phone.post("/v1/send", {"message": marker}).status_code == 200
    text.wait_for_line(re.compile(rf"^\[seq \d+\] notification: {marker}$"), LINE_TIMEOUT_S)
    assert phone.post(f"/v1/devices/{phone.device_id}/ring").status_code == 202
    text.wait_for_line(re.compile(rf"^RING for {RING_S} s$"), LINE_TIMEOUT_S)
    stop(text)


def test_a_ring_waits_for_an_offline_phone_only_as_long_as_it_would_ring(cli: Cli, phone: Phone) -> None:
    stop(start_phone(cli, phone))
    stale = phone.post(f"/v1/devices/{phone.device_id}/ring").json()
    assert any(f"within {RING_S} s" in w for w in stale["warnings"])
    time.sleep(RING_S + 1)  # this one's time passes while the phone is off
    fresh = phone.post(f"/v1/devices/{phone.device_id}/ring")
    assert fresh.status_code == 202
    run = cli.start("phone", "run", "--json", "--state", phone.state)  # connects within the window
    wait_for_record(run, lambda r: r.get("type") == "ring")
    marker = f"after the replay {time.monotonic_ns()}"
    assert phone.post("/v1/send", {"message": marker}).status_code == 200
    wait_for_record(run, lambda r: r.get("type") == "notification" and r["payload"]["message"] == marker)
    assert [r["type"] for r in records(stop(run))].count("ring") == 1  # the stale ring never rang


def test_sender_tokens_cannot_send_documents(phone: Phone) -> None:
    # Sending needs files:send, which only a connector grant holds (MCP send_file, covered in process
    # in tests/core/api/test_ring_and_documents.py; the phone's side in tests/client/test_phone_ops.py):
    # the public POST is the specification's plain 404.
    response = phone.post("/v1/documents", {"filename": "notes.md", "content": "hello"})
    assert (response.status_code, response.content) == (404, b"")
