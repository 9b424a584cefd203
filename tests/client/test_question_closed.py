"""The virtual phone hears a question closed (``interaction_closed``), in process against a real
server over HTTP: answered from another shell (``relaybox phone answer``), the running phone prints
``QUESTION CLOSED`` naming who answered and the choice, and stops offering the question to typed
lines; a computer prints one line of its own."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import httpx

from client import phone
from client.dispatch import default_dispatcher
from client.opener import Received
from client.output import Output
from client.phone_ops import PhoneOps
from client.questions import answer_question
from core.domain.envelope import open_envelope
from core.runtime.core import Core
from tests.helpers import queued_rows


def queued(core: Core, device_id: str, secret_key: bytes, kind: str) -> Received:
    """The device's newest queued payload of ``kind``, opened, as ``phone run`` receives it."""
    row = queued_rows(core.engine, device_id, kind)[-1]
    payload = json.loads(open_envelope(row.blob, secret_key, core.keys.public_key))
    return Received(int(row.seq or 0), "envelope", "server", "server", kind, payload)


def records(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_the_running_phone_prints_a_question_closed_elsewhere(
    core: Core, live_server: str, tmp_path: Path
) -> None:
    path = tmp_path / "phone.json"
    state = phone.register(path, server=live_server, name="Pixel")
    token = phone.create_token(path, label="deploy").token
    with httpx.Client(base_url=live_server, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
        asked = http.post("/v1/interactions", json={"question": "Deploy?", "choices": ["Ship it", "Wait"]})
    interaction_id = asked.json()["id"]
    out = io.StringIO()
    ops = PhoneOps(path, state, Output(as_json=True, stdout=out, stderr=io.StringIO()), interactive=True)
    dispatcher = ops.install(default_dispatcher())
    dispatcher.describe(queued(core, state.device_id, state.secret_key_bytes, "interaction_request"))
    assert [q.interaction_id for q in ops.questions.open_questions()] == [interaction_id]

    assert answer_question(state, interaction_id, 1).status == "answered"  # another shell
    closed = queued(core, state.device_id, state.secret_key_bytes, "interaction_closed")
    assert dispatcher.describe(closed) == ""
    assert records(out)[-1] == {
        "type": "question_closed",
        "interaction_id": interaction_id,
        "reason": "answered",
        "answered_by": {"device_id": state.device_id, "name": "Pixel"},
        "choice_index": 1,
    }
    assert ops.questions.open_questions() == []  # a typed "0" no longer answers it
    text = Output(as_json=False, stdout=(plain := io.StringIO()), stderr=io.StringIO())
    PhoneOps(path, state, text).install(default_dispatcher()).describe(closed)
    assert plain.getvalue().strip() == f"QUESTION CLOSED [{interaction_id}]: answered on Pixel: 1"
    ops.close()


def test_a_computer_says_in_one_line_that_the_phones_question_was_answered() -> None:
    payload: dict[str, Any] = {"type": "interaction_closed", "id": "int_1", "reason": "answered"}
    payload |= {"answered_by": {"device_id": "d", "name": "Pixel"}, "choice_index": 0, "at": 1}
    item = Received(7, "envelope", "server", "server", "interaction_closed", payload)
    assert default_dispatcher().describe(item) == "[seq 7] question int_1 answered on Pixel"
