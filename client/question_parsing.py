"""Reading the phone's questions (``interaction_request`` payloads) and the answers a person gives
them: a choice's number (0 first), a typed reply where the question allows one, or both.

A question with ``text_max_chars`` takes a typed reply of at most that many characters beside the
choice; one with no choices takes only the typed reply (docs/protocol.md, "Typed replies")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from client.dispatch import one_line
from client.payload_fields import PayloadError, id_field, integer_field, text_field
from client.state import ClientError


@dataclass(frozen=True, slots=True)
class Question:
    interaction_id: str
    question: str
    choices: tuple[str, ...]
    expires_at: int
    text_max_chars: int | None = None  # None: no typed reply


@dataclass(frozen=True, slots=True)
class Reply:
    """What answers a question: the chosen number, the typed text, or both."""

    choice: int | None
    text: str | None = None

    def describe(self, question: Question) -> str:
        """``1 (No)``, ``1 (No) "reason"`` or ``"text"``, on one line."""
        parts = [] if self.choice is None else [f"{self.choice} ({one_line(question.choices[self.choice])})"]
        if self.text is not None:
            parts.append(one_line(repr(self.text)))
        return " ".join(parts)


def parse_question(payload: Mapping[str, Any]) -> Question:
    """``id``, ``question``, ``choices`` (strings; none only with ``text_max_chars``), ``expires_at``
    and ``text_max_chars`` when a typed reply is allowed."""
    limit = payload.get("text_max_chars")
    if limit is not None:
        limit = integer_field(payload, "text_max_chars")
        if limit < 1:
            raise PayloadError("text_max_chars must be at least 1")
    choices = payload.get("choices")
    if (
        not isinstance(choices, list)
        or not (choices or limit is not None)
        or not all(isinstance(c, str) and c for c in choices)
    ):
        raise PayloadError("choices must be a list of strings")
    return Question(
        id_field(payload, "id"),
        text_field(payload, "question"),
        tuple(cast(list[str], choices)),
        integer_field(payload, "expires_at"),
        limit,
    )


def choose(answer: int, question: Question) -> int:
    """The choice ``--answer N`` gives ``question``: N, if it has that many choices."""
    if not 0 <= answer < len(question.choices):
        raise ClientError(
            "invalid_choice",
            f"{answer} is not a choice of {question.interaction_id} ({_range(question)})",
        )
    return answer


def reply_to(question: Question, choice: int | None, text: str | None) -> Reply:
    """The answer ``choice`` and ``text`` make, held to what ``question`` takes (the server holds
    it to the same, so a refusal here saves a round trip)."""
    name = question.interaction_id
    if not question.choices:
        if choice is not None:
            raise ClientError("invalid_choice", f"{name} has no choices: type the reply alone")
        if not text:
            raise ClientError("text_required", f"{name} takes a typed reply: {how_to_answer(question)}")
    elif choice is None:
        raise ClientError("choice_required", f"{name} needs a choice: {how_to_answer(question)}")
    else:
        choose(choice, question)
    if text is None:
        return Reply(choice)
    if question.text_max_chars is None:
        raise ClientError("text_not_allowed", f"{name} takes no typed reply, only a choice")
    if not text:
        raise ClientError("text_required", "the typed reply is empty")
    if len(text) > question.text_max_chars:
        raise ClientError(
            "text_too_long", f"the reply has {len(text)} characters; {name} takes {question.text_max_chars}"
        )
    return Reply(choice, text)


def parse_answer_line(line: str, pending: Sequence[Question]) -> tuple[Question, Reply]:
    """A line typed while ``phone run`` shows questions: ``N`` answers the newest open question,
    ``INTERACTION_ID N`` the one named; a typed reply follows the number (``1 not today``), or is
    the whole line for a question without choices. ``N`` is the choice's number as shown (0 first)."""
    first, _, rest = line.strip().partition(" ")
    named = [q for q in pending if q.interaction_id == first]
    if named:
        question, line = named[0], rest
    elif first.startswith("int_") and rest.strip().isdigit():
        raise ClientError("unknown_question", f"{first!r} is not an open question here")
    elif pending:
        question = pending[-1]
    else:
        raise ClientError("no_question", "there is no open question to answer")
    line = line.strip()
    if not question.choices:
        return question, reply_to(question, None, line)
    number, _, text = line.partition(" ")
    if not (number.isascii() and number.isdigit()):
        raise ClientError("invalid_answer", f"{number!r} is not a choice number ({_range(question)})")
    if text.strip() and question.text_max_chars is None:
        raise ClientError(
            "invalid_answer", f"{question.interaction_id} takes only a choice number ({_range(question)})"
        )
    return question, reply_to(question, int(number), text.strip() or None)


def how_to_answer(question: Question) -> str:
    """What to type for ``question``, as the terminal prompt says it."""
    if not question.choices:
        return f"type the reply (at most {question.text_max_chars} characters)"
    numbers = f"type a choice number ({_range(question)})"
    if question.text_max_chars is None:
        return numbers
    return f"{numbers}, then a reply if you like (at most {question.text_max_chars} characters)"


def _range(question: Question) -> str:
    return f"choose 0 to {len(question.choices) - 1}"
