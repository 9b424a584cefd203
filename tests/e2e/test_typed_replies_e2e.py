"""Acceptance: the virtual phone (``relaybox phone run`` and ``relaybox phone answer``) answers
questions with typed replies through a real ``relaybox serve``; the caller's long poll gets the
text once; neither the server's database files nor its output ever hold it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Cli, RelayboxServer
from tests.e2e.test_phone_ops_e2e import HTTP_TIMEOUT_S, Phone, ok, stop, wait_for_record

pytestmark = pytest.mark.e2e

REASON = "not before the backup — ü"
TYPED = "staging first"


@pytest.fixture
def phone(cli: Cli, tmp_path: Path) -> Iterator[Phone]:
    """A registered virtual phone and the caller's client, with a sender token of its own."""
    state = tmp_path / "phone.json"
    ok(cli.run("phone", "register", "--name", "Pixel", "--state", state))
    token = ok(cli.run("phone", "tokens", "create", "--label", "e2e", "--state", state)).stdout.strip()
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(
        base_url=cli.server_url, headers=headers, timeout=HTTP_TIMEOUT_S, trust_env=False
    ) as http:
        yield Phone(state, json.loads(state.read_text())["device_id"], token, http)


def ask(phone: Phone, **fields: Any) -> str:
    asked = phone.post("/v1/interactions", {"question": "Deploy?", **fields})
    assert asked.status_code == 201, asked.text
    return str(asked.json()["id"])


def read(phone: Phone, interaction_id: str, wait: int = 0) -> dict[str, Any]:
    response = phone.http.get(f"/v1/interactions/{interaction_id}", params={"wait": wait})
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_the_phone_denies_with_a_reason_and_the_long_poll_gets_it_once(cli: Cli, phone: Phone) -> None:
    interaction_id = ask(phone, choices=["Ship it", "Wait"], allow_text=True, text_max_chars=80)
    polled: list[dict[str, Any]] = []
    poller = threading.Thread(target=lambda: polled.append(read(phone, interaction_id, wait=30)), daemon=True)
    poller.start()
    run = cli.start(
        "phone", "run", "--answer", "1", "--answer-text", REASON, "--json", "--state", phone.state
    )
    question = wait_for_record(run, lambda r: r.get("type") == "question")
    assert (question["interaction_id"], question["text_max_chars"]) == (interaction_id, 80)
    answered = wait_for_record(run, lambda r: r.get("type") in ("answered", "answer_failed"))
    assert (answered["type"], answered["choice_index"], answered["text"]) == ("answered", 1, REASON), answered
    poller.join(HTTP_TIMEOUT_S)
    assert polled and (polled[0]["status"], polled[0]["choice_index"]) == ("answered", 1)
    assert polled[0]["text"] == REASON
    again = read(phone, interaction_id)
    assert "text" not in again and again["text_already_read"] is True

    # A question without choices takes the typed reply alone; one without allow_text takes none.
    only_text = ask(phone, question="Which branch?", choices=[], allow_text=True)
    typed = wait_for_record(run, lambda r: r.get("type") in ("answered", "answer_failed"))
    assert (typed["interaction_id"], typed["choice_index"], typed["text"]) == (only_text, None, REASON)
    assert read(phone, only_text)["text"] == REASON
    plain = ask(phone, question="Restart?")
    chose = wait_for_record(run, lambda r: r.get("type") in ("answered", "answer_failed"))
    assert (chose["interaction_id"], chose["choice_index"], "text" in chose) == (plain, 1, False)
    stop(run)


def test_phone_answer_sends_a_typed_reply_and_the_server_keeps_no_plaintext(
    cli: Cli, phone: Phone, relaybox_process: RelayboxServer
) -> None:
    only_text = ask(phone, question="Which branch?", choices=[], allow_text=True)
    done = ok(cli.run("phone", "answer", only_text, "--text", TYPED, "--state", phone.state))
    assert done.stdout == f"answered {only_text} with a typed reply (answered)\n"
    assert TYPED not in database_bytes(relaybox_process)  # it waits sealed
    assert read(phone, only_text)["text"] == TYPED
    assert read(phone, only_text)["text_already_read"] is True

    with_reason = ask(phone, allow_text=True)
    done = ok(cli.run("phone", "answer", with_reason, "1", "--text", TYPED, "--state", phone.state))
    assert done.stdout == f"answered {with_reason} with choice 1 and a typed reply (answered)\n"
    assert (read(phone, with_reason)["choice_index"], read(phone, with_reason).get("text")) == (1, None)

    plain = ask(phone, question="Restart?")
    refused = cli.run("phone", "answer", plain, "0", "--text", TYPED, "--state", phone.state)
    assert refused.returncode == 1 and refused.stderr.startswith("error: text_not_allowed: "), refused
    needs_something = cli.run("phone", "answer", plain, "--state", phone.state)
    assert needs_something.returncode == 1 and needs_something.stderr.startswith("error: invalid_answer: ")
    too_long = ask(phone, question="Short?", allow_text=True, text_max_chars=3)
    refused = cli.run("phone", "answer", too_long, "0", "--text", "four", "--state", phone.state)
    assert refused.returncode == 1 and refused.stderr.startswith("error: text_too_long: "), refused

    assert TYPED not in database_bytes(relaybox_process)
    assert TYPED not in relaybox_process.stdout() + relaybox_process.stderr()


def database_bytes(server: RelayboxServer) -> str:
    """Every byte of the server's SQLite files (database, WAL), as Latin-1 text."""
    data = Path(server.stderr_path).parent / "data"
    return "".join(path.read_bytes().decode("latin-1") for path in data.rglob("*.db*"))


def test_the_phones_refusal_reaches_the_command_line_unchanged(cli: Cli, phone: Phone) -> None:
    """``phone answer`` checks nothing the question says (it has not seen it): the server's codes
    come back as they are."""
    interaction_id = ask(phone, allow_text=True)
    refused = cli.run("phone", "answer", interaction_id, "--text", TYPED, "--state", phone.state)
    assert refused.returncode == 1 and refused.stderr.startswith("error: choice_required: "), refused
