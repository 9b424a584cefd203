"""The phone's questions (``interaction_request`` envelopes): shown with their numbered choices
(the number is the ``choice_index`` sent back, 0 first) and answered with ``--answer N``, by typing
a number when standard input is a terminal, or later with ``relaybox phone answer``."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import httpx

from client.api import ApiError
from client.dispatch import one_line
from client.opener import Received
from client.output import Output
from client.payload_fields import PayloadError, id_field, integer_field, text_field
from client.phone_api import Answered, PhoneApi
from client.state import ClientError, DeviceState


@dataclass(frozen=True, slots=True)
class Question:
    interaction_id: str
    question: str
    choices: tuple[str, ...]
    expires_at: int


def parse_question(payload: Mapping[str, Any]) -> Question:
    """An ``interaction_request`` payload: ``id``, ``question``, ``choices`` (strings), ``expires_at``."""
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not all(isinstance(c, str) and c for c in choices):
        raise PayloadError("choices must be a list of strings")
    return Question(
        id_field(payload, "id"),
        text_field(payload, "question"),
        tuple(cast(list[str], choices)),
        integer_field(payload, "expires_at"),
    )


def choose(answer: int, question: Question) -> int:
    """The choice ``--answer N`` gives ``question``: N, if it has that many choices."""
    if not 0 <= answer < len(question.choices):
        raise ClientError(
            "invalid_choice", f"{answer} is not a choice of {question.interaction_id} ({_range(question)})"
        )
    return answer


def parse_answer_line(text: str, pending: Sequence[Question]) -> tuple[Question, int]:
    """A line typed while ``phone run`` shows questions: ``N`` answers the newest open question,
    ``INTERACTION_ID N`` the one named. ``N`` is the choice's number as shown (0 first)."""
    words = text.split()
    if len(words) == 1:
        if not pending:
            raise ClientError("no_question", "there is no open question to answer")
        question, number = pending[-1], words[0]
    elif len(words) == 2:
        named = [q for q in pending if q.interaction_id == words[0]]
        if not named:
            raise ClientError("unknown_question", f"{words[0]!r} is not an open question here")
        question, number = named[0], words[1]
    else:
        raise ClientError("invalid_answer", "type a choice number, or INTERACTION_ID NUMBER")
    if not (number.isascii() and number.isdigit()):
        raise ClientError("invalid_answer", f"{number!r} is not a choice number ({_range(question)})")
    return question, choose(int(number), question)


def _range(question: Question) -> str:
    return f"choose 0 to {len(question.choices) - 1}"


class PhoneQuestions:
    """Shows the questions asked of the phone and sends its answers through ``api``: every one
    with choice ``answer``; else, when ``interactive``, typed on ``stdin_fd`` (read by ``reader``
    once started); else by ``relaybox phone answer`` later."""

    def __init__(
        self,
        api: PhoneApi,
        output: Output,
        *,
        answer: int | None = None,
        interactive: bool = False,
        clock: Callable[[], float] = time.time,
        stdin_fd: int = 0,
    ) -> None:
        self.output = output
        self.answer = answer
        self.interactive = interactive and answer is None
        self._api = api
        self._clock = clock
        self._stdin_fd = stdin_fd
        self._pending: list[Question] = []
        self._pending_lock = threading.Lock()
        self.reader: threading.Thread | None = None  # reads typed answers until stdin ends

    def start(self) -> None:
        if self.interactive and self.reader is None:
            self.reader = threading.Thread(target=self._read_answers, name="relaybox-answers", daemon=True)
            self.reader.start()

    def on_question(self, item: Received) -> str:
        try:
            question = parse_question(item.payload)
        except PayloadError as error:
            return one_line(f"interaction_request that cannot be read: {error}")
        lines = [f"QUESTION [{question.interaction_id}]: {one_line(question.question)}"]
        lines += [f"  [{index}] {one_line(choice)}" for index, choice in enumerate(question.choices)]
        self.output.show(
            lines,
            {
                "type": "question",
                "interaction_id": question.interaction_id,
                "question": question.question,
                "choices": list(question.choices),
                "expires_at": question.expires_at,
            },
        )
        if self.answer is not None:
            try:
                index = choose(self.answer, question)
            except ClientError as error:
                self._answer_failed(question, self.answer, error.code, error.message)
                return ""
            self.send_answer(question, index)
        elif self.interactive:
            with self._pending_lock:
                self._pending.append(question)
            self.output.note(f"answer: type a choice number ({_range(question)}) and Enter")
        else:
            self.output.note(f"answer with: relaybox phone answer {question.interaction_id} N")
        return ""

    def send_answer(self, question: Question, index: int) -> bool:
        """Send the answer; print ``ANSWERED [id] N (choice)`` or why it was refused."""
        sent_at = time.time()
        try:
            answered = self._api.answer_interaction(question.interaction_id, index)
        except ClientError as error:
            # The server's refusal is final; a lost connection leaves the question open to retry.
            if not (isinstance(error, ApiError) and error.status == 0):
                self._close_question(question)
            self._answer_failed(question, index, error.code, error.message)
            return False
        at = time.time()
        self._close_question(question)
        self.output.show(
            f"ANSWERED [{question.interaction_id}] {index} ({one_line(question.choices[index])})",
            {
                "type": "answered",
                "interaction_id": question.interaction_id,
                "choice_index": index,
                "choice": question.choices[index],
                "status": answered.status,
                "sent_at": round(sent_at, 6),
                "at": round(at, 6),
            },
        )
        return True

    def _answer_failed(self, question: Question, index: int, code: str, message: str) -> None:
        self.output.show(
            f"ANSWER FAILED [{question.interaction_id}] {index}: {code}: {one_line(message)}",
            {
                "type": "answer_failed",
                "interaction_id": question.interaction_id,
                "choice_index": index,
                "code": code,
                "message": message,
            },
        )

    def _close_question(self, question: Question) -> None:
        with self._pending_lock:
            if question in self._pending:
                self._pending.remove(question)

    def open_questions(self) -> list[Question]:
        """Questions shown and not yet answered or expired (interactive mode)."""
        now = self._clock()
        with self._pending_lock:
            self._pending = [q for q in self._pending if q.expires_at > now]
            return list(self._pending)

    def answer_typed(self, text: str) -> None:
        """One line typed by the person at the terminal (see ``parse_answer_line``)."""
        if not text.strip():
            return
        try:
            question, index = parse_answer_line(text, self.open_questions())
        except ClientError as error:
            self.output.note(f"error: {error.code}: {error.message}")
            return
        self.send_answer(question, index)

    def _read_answers(self) -> None:
        # os.read on the descriptor, not sys.stdin: a daemon thread blocked inside a buffered
        # reader would hold its lock at interpreter exit.
        buffer = b""
        while True:
            try:
                chunk = os.read(self._stdin_fd, 4096)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, _, buffer = buffer.partition(b"\n")
                with contextlib.suppress(Exception):  # a broken output must not end the reader noisily
                    self.answer_typed(line.decode("utf-8", "replace"))


def answer_question(
    state: DeviceState,
    interaction_id: str,
    choice_index: int,
    *,
    transport: httpx.BaseTransport | None = None,
) -> Answered:
    """Answer a question from outside ``phone run`` (``relaybox phone answer``)."""
    with PhoneApi(state.server, state.device_token, transport=transport) as api:
        return api.answer_interaction(interaction_id, choice_index)
