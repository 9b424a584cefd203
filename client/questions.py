"""The phone's questions (``interaction_request`` envelopes): shown with their numbered choices
(the number is the ``choice_index`` sent back, 0 first) and answered with ``--answer N`` (and
``--answer-text TEXT`` where a typed reply is allowed), by typing a line when standard input is a
terminal, or later with ``relaybox phone answer``. A typed reply is sealed to the server's key
(``core.domain.typed_reply``); ``client.question_parsing`` reads questions and typed lines."""

from __future__ import annotations

import base64
import contextlib
import os
import threading
import time
from collections.abc import Callable

import httpx

from client.api import ApiError
from client.dispatch import one_line
from client.opener import Received
from client.output import Output
from client.payload_fields import PayloadError, content_of, id_field
from client.phone_api import Answered, PhoneApi
from client.question_parsing import (
    Question,
    Reply,
    how_to_answer,
    parse_answer_line,
    parse_question,
    reply_to,
)
from client.state import ClientError, DeviceState
from core.domain.envelope import PairBox
from core.domain.keys import decode_public_key
from core.domain.typed_reply import seal_typed_reply

SHOWN = 100  # questions remembered for their closing line (a question lives at most a day)


class PhoneQuestions:
    """Shows the questions asked of the phone and sends its answers through ``api``: every one
    with choice ``answer`` and, where a typed reply is allowed, ``answer_text`` (a question without
    choices takes ``answer_text`` alone); else, when ``interactive``, typed on ``stdin_fd`` (read by
    ``reader`` once started); else by ``relaybox phone answer`` later. ``box`` seals typed replies
    to the server (``server_box``). A typed line ``other_lines`` takes (returns true for) is not an
    answer."""

    def __init__(
        self,
        api: PhoneApi,
        output: Output,
        box: PairBox,
        *,
        answer: int | None = None,
        answer_text: str | None = None,
        interactive: bool = False,
        clock: Callable[[], float] = time.time,
        stdin_fd: int = 0,
        other_lines: Callable[[str], bool] = lambda _line: False,
    ) -> None:
        self.output = output
        self._other_lines = other_lines
        self.answer = answer
        self.answer_text = answer_text
        self.automatic = answer is not None or answer_text is not None
        self.interactive = interactive and not self.automatic
        self._api = api
        self._box = box
        self._clock = clock
        self._stdin_fd = stdin_fd
        self._pending: list[Question] = []
        self._shown: dict[str, Question] = {}  # this run's questions by id, newest last (at most SHOWN)
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
        with self._pending_lock:
            self._shown[question.interaction_id] = question
            while len(self._shown) > SHOWN:
                del self._shown[next(iter(self._shown))]
        lines = [f"QUESTION [{question.interaction_id}]: {one_line(question.question)}"]
        lines += [f"  [{index}] {one_line(choice)}" for index, choice in enumerate(question.choices)]
        if question.text_max_chars is not None:
            lines.append(f"  [text] a typed reply, at most {question.text_max_chars} characters")
        self.output.show(
            lines,
            {
                "type": "question",
                "interaction_id": question.interaction_id,
                "question": question.question,
                "choices": list(question.choices),
                "expires_at": question.expires_at,
            }
            | ({} if question.text_max_chars is None else {"text_max_chars": question.text_max_chars}),
        )
        if self.automatic:
            self._answer_automatically(question)
        elif self.interactive:
            with self._pending_lock:
                self._pending.append(question)
            self.output.note(f"answer: {how_to_answer(question)} and Enter")
        else:
            self.output.note(
                f"answer with: relaybox phone answer {question.interaction_id} {_usage(question)}"
            )
        return ""

    def on_closed(self, item: Received) -> str:
        """An ``interaction_closed``: answered on some device of the account (this one too). Prints
        ``QUESTION CLOSED [id]: answered on NAME: N (choice)`` and stops waiting for a typed answer."""
        try:
            content = content_of(item, "interaction_closed")
            interaction_id = id_field(content, "id")
        except PayloadError as error:
            return one_line(f"interaction_closed that cannot be read: {error}")
        by = content.get("answered_by")
        name = by.get("name") if isinstance(by, dict) else None
        choice = content.get("choice_index")
        with self._pending_lock:
            question = self._shown.get(interaction_id)
            self._pending = [q for q in self._pending if q.interaction_id != interaction_id]
        label = ""
        if isinstance(choice, int) and not isinstance(choice, bool):
            label = f": {choice}"
            if question is not None and 0 <= choice < len(question.choices):
                label += f" ({one_line(question.choices[choice])})"
        where = f" on {one_line(name)}" if isinstance(name, str) and name else ""
        self.output.show(
            f"QUESTION CLOSED [{interaction_id}]: answered{where}{label}",
            {
                "type": "question_closed",
                "interaction_id": interaction_id,
                "reason": content.get("reason"),
                "answered_by": by if isinstance(by, dict) else None,
                "choice_index": choice,
            },
        )
        return ""

    def _answer_automatically(self, question: Question) -> None:
        choice = self.answer if question.choices else None
        text = self.answer_text if question.text_max_chars is not None else None
        try:
            reply = reply_to(question, choice, text)
        except ClientError as error:
            self._answer_failed(question, Reply(choice, text), error.code, error.message)
            return
        self.send_answer(question, reply)

    def send_answer(self, question: Question, reply: Reply) -> bool:
        """Send the answer; print ``ANSWERED [id] N (choice) "text"`` or why it was refused."""
        sent_at = time.time()
        sealed = None if reply.text is None else sealed_text(self._box, question.interaction_id, reply.text)
        try:
            answered = self._api.answer_interaction(question.interaction_id, reply.choice, sealed)
        except ClientError as error:
            # The server's refusal is final; a lost connection leaves the question open to retry.
            if not (isinstance(error, ApiError) and error.status == 0):
                self._close_question(question)
            self._answer_failed(question, reply, error.code, error.message)
            return False
        at = time.time()
        self._close_question(question)
        self.output.show(
            f"ANSWERED [{question.interaction_id}] {reply.describe(question)}",
            {
                "type": "answered",
                "interaction_id": question.interaction_id,
                "choice_index": reply.choice,
                "choice": None if reply.choice is None else question.choices[reply.choice],
                "status": answered.status,
                "sent_at": round(sent_at, 6),
                "at": round(at, 6),
            }
            | ({} if reply.text is None else {"text": reply.text}),
        )
        return True

    def _answer_failed(self, question: Question, reply: Reply, code: str, message: str) -> None:
        tried = "".join(
            [f" {reply.choice}" if reply.choice is not None else "", " (typed reply)" if reply.text else ""]
        )
        self.output.show(
            f"ANSWER FAILED [{question.interaction_id}]{tried}: {code}: {one_line(message)}",
            {
                "type": "answer_failed",
                "interaction_id": question.interaction_id,
                "choice_index": reply.choice,
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
        """One line typed by the person at the terminal (see ``parse_answer_line``), unless
        ``other_lines`` takes it (``ack`` for an urgent alert)."""
        if not text.strip() or self._other_lines(text):
            return
        try:
            question, reply = parse_answer_line(text, self.open_questions())
        except ClientError as error:
            self.output.note(f"error: {error.code}: {error.message}")
            return
        self.send_answer(question, reply)

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


def server_box(state: DeviceState) -> PairBox:
    """The box between this phone and its server: seals typed replies to the server's key."""
    return PairBox(state.secret_key_bytes, decode_public_key(state.server_public_key))


def sealed_text(box: PairBox, interaction_id: str, text: str) -> str:
    """``text`` as the answer's ``sealed_text``: base64 of its envelope to the server."""
    return base64.b64encode(seal_typed_reply(box, interaction_id=interaction_id, text=text)).decode()


def answer_question(
    state: DeviceState,
    interaction_id: str,
    choice_index: int | None,
    text: str | None = None,
    *,
    transport: httpx.BaseTransport | None = None,
) -> Answered:
    """Answer a question from outside ``phone run`` (``relaybox phone answer``): a choice, a typed
    reply sealed to the server, or both (the server holds them to what the question takes)."""
    sealed = None if text is None else sealed_text(server_box(state), interaction_id, text)
    with PhoneApi(state.server, state.device_token, transport=transport) as api:
        return api.answer_interaction(interaction_id, choice_index, sealed)


def _usage(question: Question) -> str:
    if not question.choices:
        return '--text "..."'
    return "N" if question.text_max_chars is None else 'N [--text "..."]'
