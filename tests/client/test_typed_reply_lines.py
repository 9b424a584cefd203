"""The virtual phone's typed replies without a server: questions that allow text are read and
shown as such, typed lines become a choice and a reply (or a reply alone), and what is sent is the
reply sealed to the server's key as an ``interaction_text`` payload for that question."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import httpx
import pytest

from client.opener import Received
from client.output import Output
from client.payload_fields import PayloadError
from client.phone_api import PhoneApi
from client.question_parsing import Question, Reply, parse_answer_line, parse_question, reply_to
from client.questions import PhoneQuestions
from client.state import ClientError
from core.domain.envelope import PairBox, open_envelope
from core.domain.keys import generate_keypair

ASKED = {"type": "interaction_request", "id": "int_1", "question": "Deploy?", "expires_at": 2_000}
WITH_TEXT = Question("int_1", "Deploy?", ("Ship", "Wait"), 2_000, 20)
ONLY_TEXT = Question("int_2", "Which branch?", (), 2_000, 20)
NO_TEXT = Question("int_3", "Restart?", ("Yes", "No"), 2_000)


def test_a_question_that_takes_text_says_so_and_may_have_no_choices() -> None:
    assert parse_question(ASKED | {"choices": ["Ship", "Wait"], "text_max_chars": 20}) == WITH_TEXT
    assert parse_question(ASKED | {"choices": [], "text_max_chars": 20}).choices == ()
    wrong: list[dict[str, Any]] = [
        {"choices": []},
        {"choices": [], "text_max_chars": 0},
        {"choices": ["a"], "text_max_chars": "9"},
    ]
    for change in wrong:
        with pytest.raises(PayloadError, match=r"choices|text_max_chars"):
            parse_question(ASKED | change)


def test_typed_lines_carry_a_choice_a_reply_or_both() -> None:
    pending = [NO_TEXT, WITH_TEXT]
    assert parse_answer_line("1 not  before noon ", pending) == (WITH_TEXT, Reply(1, "not  before noon"))
    assert parse_answer_line("0", pending) == (WITH_TEXT, Reply(0))
    assert parse_answer_line("int_3 1", pending) == (NO_TEXT, Reply(1))
    assert parse_answer_line("release 2.4", [ONLY_TEXT]) == (ONLY_TEXT, Reply(None, "release 2.4"))
    assert parse_answer_line("int_2 3", [ONLY_TEXT, NO_TEXT]) == (ONLY_TEXT, Reply(None, "3"))
    for line, questions, code in [
        ("int_3 1 because", pending, "invalid_answer"),
        ("0 " + "x" * 21, pending, "text_too_long"),
        ("Ship it", pending, "invalid_answer"),
        ("int_2", [ONLY_TEXT], "text_required"),
    ]:
        with pytest.raises(ClientError) as raised:
            parse_answer_line(line, questions)
        assert raised.value.code == code, line


def test_a_reply_is_held_to_what_the_question_takes() -> None:
    assert reply_to(ONLY_TEXT, None, "x" * 20) == Reply(None, "x" * 20)
    for question, choice, text, code in [
        (ONLY_TEXT, 0, "x", "invalid_choice"),
        (ONLY_TEXT, None, None, "text_required"),
        (WITH_TEXT, None, "x", "choice_required"),
        (WITH_TEXT, 2, None, "invalid_choice"),
        (NO_TEXT, 0, "x", "text_not_allowed"),
        (WITH_TEXT, 0, "", "text_required"),
    ]:
        with pytest.raises(ClientError) as raised:
            reply_to(question, choice, text)
        assert raised.value.code == code, (question, choice, text)


class Recorder:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        return httpx.Response(200, json={"id": "int_1", "status": "answered"})


def questions(recorder: Recorder, box: PairBox, **options: Any) -> tuple[PhoneQuestions, io.StringIO]:
    out = io.StringIO()
    api = PhoneApi("http://relaybox.test", "dev_token", transport=httpx.MockTransport(recorder.handle))
    return PhoneQuestions(api, Output(stdout=out, stderr=io.StringIO()), box, **options), out


def test_what_is_sent_is_the_reply_sealed_for_that_question_to_the_server() -> None:
    (phone_secret, phone_public), (server_secret, server_public) = generate_keypair(), generate_keypair()
    recorder = Recorder()
    asking, out = questions(recorder, PairBox(phone_secret, server_public), interactive=False)
    assert asking.send_answer(WITH_TEXT, Reply(1, "not today"))
    assert asking.send_answer(ONLY_TEXT, Reply(None, "main"))
    assert out.getvalue().splitlines() == ["ANSWERED [int_1] 1 (Wait) 'not today'", "ANSWERED [int_2] 'main'"]
    first, second = recorder.bodies
    assert first["choice_index"] == 1 and "choice_index" not in second
    opened = open_envelope(base64.b64decode(first["sealed_text"]), server_secret, phone_public)
    assert opened == b'{"type":"interaction_text","id":"int_1","text":"not today"}'
    opened = open_envelope(base64.b64decode(second["sealed_text"]), server_secret, phone_public)
    assert json.loads(opened) == {"type": "interaction_text", "id": "int_2", "text": "main"}


def test_answer_text_answers_every_question_that_takes_one() -> None:
    (phone_secret, _), (_, server_public) = generate_keypair(), generate_keypair()
    recorder = Recorder()
    asking, out = questions(recorder, PairBox(phone_secret, server_public), answer=0, answer_text="ok")
    for payload in (
        ASKED | {"choices": ["Ship", "Wait"], "text_max_chars": 20},
        ASKED | {"id": "int_2", "choices": [], "text_max_chars": 20},
        ASKED | {"id": "int_3", "choices": ["Yes", "No"]},
    ):
        asking.on_question(Received(1, "envelope", "server", "server", "interaction_request", payload))
    assert [set(body) for body in recorder.bodies] == [
        {"choice_index", "sealed_text"},
        {"sealed_text"},
        {"choice_index"},
    ]
    assert "  [text] a typed reply, at most 20 characters" in out.getvalue()
    only_choice, failed = questions(recorder, PairBox(phone_secret, server_public), answer=0)
    only_choice.on_question(
        Received(
            1,
            "envelope",
            "server",
            "server",
            "interaction_request",
            ASKED | {"choices": [], "text_max_chars": 5},
        )
    )
    assert "ANSWER FAILED [int_1]: text_required: " in failed.getvalue()
