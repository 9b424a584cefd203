"""What the virtual phone does with reminders, questions, rings and documents (``relaybox phone run``).

- **Reminders** arrive as live pushes (``reminder``, ``reminder_cancel``; never queued). An armed
  reminder is kept in the state file (``reminders``) until it fires, so a restarted phone arms it
  again; one whose time passed while the phone was off fires at once. ``ReminderScheduler`` fires
  them from a background thread (a heap and a condition variable), so they ring on time while the
  follower blocks on the stream. A cancel for an id that is not armed is ignored silently.
- **Questions** (``interaction_request`` envelopes) are shown with their numbered choices (the
  number is the ``choice_index`` sent back, 0 first) and answered with ``--answer N``, by typing a
  number when standard input is a terminal, or later with ``relaybox phone answer``.
- **Ring** prints ``RING for <n> s`` and sounds the terminal bell.
- **Documents** (a ``document`` push naming a parked document) are pulled, decrypted, their filename
  made safe again (``core.domain.filenames``) and written into the Downloads folder atomically and
  without replacing an existing file (``notes (1).md``).

``Output`` prints each outcome as text lines or, with ``--json``, as one JSON object per line; it is
shared with the follower so lines from the reminder thread never interleave with other output.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import heapq
import itertools
import json
import os
import re
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self, TextIO, cast
from urllib.parse import quote

import httpx

from client.api import ApiError, RelayboxApi
from client.state import ClientError, DeviceState, read_field, update_fields
from client.stream import Dispatcher, Received, one_line
from core.domain.envelope import EnvelopeError, open_envelope
from core.domain.filenames import UnsafeFilenameError, sanitize_filename
from core.domain.keys import InvalidPublicKey, decode_public_key

REMINDERS: Final = "reminders"  # the state file's field of armed reminders
MAX_WAIT_S = 30.0  # the reminder thread re-reads the clock at least this often (wall-clock jumps)
LATE_NOTE_S = 60  # a reminder fired this late also gets a note saying when it was due
MAX_COPIES = 999  # "name (999).ext" is the last name tried before giving up
DOWNLOADS_DIR = "Downloads"
_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")


class PayloadError(ValueError):
    """A server payload that lacks a field or has one of the wrong type."""


class DocumentError(ClientError):
    """A document that could not be pulled, opened, named safely or written."""


# Output.


class Output:
    """Stdout for results, stderr for notes; one locked write per line (several threads print).

    ``as_json``: each result is one JSON object per line instead of its text lines. Streams default
    to ``sys.stdout`` / ``sys.stderr`` as they are when writing.
    """

    def __init__(
        self, *, as_json: bool = False, stdout: TextIO | None = None, stderr: TextIO | None = None
    ) -> None:
        self.as_json = as_json
        self._stdout = stdout
        self._stderr = stderr
        self._lock = threading.Lock()

    @property
    def stdout(self) -> TextIO:
        return self._stdout or sys.stdout

    @property
    def stderr(self) -> TextIO:
        return self._stderr or sys.stderr

    def line(self, text: str) -> None:
        self._write(self.stdout, text + "\n")

    def note(self, text: str) -> None:
        self._write(self.stderr, text + "\n")

    def show(self, lines: str | Sequence[str], record: Mapping[str, Any]) -> None:
        """The text ``lines`` (already one-line safe), or in JSON mode the ``record``."""
        if self.as_json:
            self.line(json.dumps(record, ensure_ascii=False))
        else:
            self.line(lines if isinstance(lines, str) else "\n".join(lines))

    def bell(self) -> None:
        """The terminal bell, on the first of stdout (text mode only) and stderr that is a terminal."""
        for stream, allowed in ((self.stdout, not self.as_json), (self.stderr, True)):
            if allowed and _is_terminal(stream):
                self._write(stream, "\a")
                return

    def _write(self, stream: TextIO, text: str) -> None:
        with self._lock:
            stream.write(text)
            stream.flush()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (ValueError, OSError):  # closed, or not a real file
        return False


# Reminders.


@dataclass(frozen=True, slots=True)
class Reminder:
    reminder_id: str
    fire_at: int  # epoch seconds
    message: str


def parse_reminder(payload: Mapping[str, Any]) -> Reminder:
    """A ``reminder`` payload: ``reminder_id``, ``fire_at`` (epoch s), ``message``."""
    return Reminder(_id(payload, "reminder_id"), _integer(payload, "fire_at"), _text(payload, "message"))


class ReminderQueue:
    """Armed reminders by id and a heap by fire time; arming an id again replaces it. Entries of
    replaced or cancelled reminders stay in the heap and are skipped when they surface. Not
    thread-safe (``ReminderScheduler`` holds the lock)."""

    def __init__(self) -> None:
        self._armed: dict[str, Reminder] = {}
        self._heap: list[tuple[int, int, str]] = []
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._armed)

    def arm(self, reminder: Reminder) -> None:
        self._armed[reminder.reminder_id] = reminder
        heapq.heappush(self._heap, (reminder.fire_at, next(self._order), reminder.reminder_id))

    def cancel(self, reminder_id: str) -> Reminder | None:
        return self._armed.pop(reminder_id, None)

    def armed(self) -> list[Reminder]:
        """Every armed reminder, soonest first."""
        return sorted(self._armed.values(), key=lambda reminder: reminder.fire_at)

    def next_due(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[Reminder]:
        """Disarm and return the reminders due at ``now``, in fire-time then arming order."""
        due: list[Reminder] = []
        while (fire_at := self.next_due()) is not None and fire_at <= now:
            _, _, reminder_id = heapq.heappop(self._heap)
            due.append(self._armed.pop(reminder_id))
        return due

    def _drop_stale(self) -> None:
        while self._heap:
            fire_at, _, reminder_id = self._heap[0]
            current = self._armed.get(reminder_id)
            if current is not None and current.fire_at == fire_at:
                return
            heapq.heappop(self._heap)


class ReminderScheduler:
    """Fires armed reminders at their time from one background thread, without polling.

    The thread sleeps on a condition variable until the next fire time (at most ``max_wait``, so a
    changed wall clock is noticed); arming, cancelling, ``poke`` and ``close`` wake it. ``clock``
    gives epoch seconds (tests inject one and ``poke`` after moving it). ``fire`` runs on the
    thread, outside the lock; ``on_change`` gets the armed reminders after every change (arm,
    cancel, fire) — it is called under a lock of its own, with the latest list, so saves are never
    reordered. A reminder is saved as disarmed only after it fired (a crash in between fires it
    again rather than never). Errors raised by ``fire`` or ``on_change`` on the thread go to
    ``on_error``.
    """

    def __init__(
        self,
        fire: Callable[[Reminder], None],
        *,
        clock: Callable[[], float] = time.time,
        on_change: Callable[[list[Reminder]], None] = lambda _armed: None,
        on_error: Callable[[Exception], None] = lambda _error: None,
        max_wait: float = MAX_WAIT_S,
    ) -> None:
        self._fire = fire
        self._clock = clock
        self._on_change = on_change
        self._on_error = on_error
        self._max_wait = max_wait
        self._queue = ReminderQueue()
        self._condition = threading.Condition()
        self._save_lock = threading.Lock()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="relaybox-reminders", daemon=True)
            self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        with self._condition:
            self._stopped = True
            self._condition.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def restore(self, reminders: Sequence[Reminder]) -> None:
        """Arm reminders read back from the state file (no save: they are there already)."""
        with self._condition:
            for reminder in reminders:
                self._queue.arm(reminder)
            self._condition.notify_all()

    def arm(self, reminder: Reminder) -> None:
        with self._condition:
            self._queue.arm(reminder)
            self._condition.notify_all()
        self._changed()

    def cancel(self, reminder_id: str) -> Reminder | None:
        """Disarm ``reminder_id``; ``None`` (and nothing saved) when it is not armed."""
        with self._condition:
            removed = self._queue.cancel(reminder_id)
            self._condition.notify_all()
        if removed is not None:
            self._changed()
        return removed

    def armed(self) -> list[Reminder]:
        with self._condition:
            return self._queue.armed()

    def poke(self) -> None:
        """Wake the thread to look at the clock again."""
        with self._condition:
            self._condition.notify_all()

    def _run(self) -> None:
        while True:
            with self._condition:
                if self._stopped:
                    return
                due = self._queue.pop_due(self._clock())
                if not due:
                    next_due = self._queue.next_due()
                    wait = self._max_wait if next_due is None else next_due - self._clock()
                    self._condition.wait(min(max(wait, 0.0), self._max_wait))
                    continue
            for reminder in due:
                self._guarded(functools.partial(self._fire, reminder))
            self._guarded(self._changed)

    def _guarded(self, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as error:  # keep the thread alive: one failure must not stop later reminders
            self._on_error(error)

    def _changed(self) -> None:
        with self._save_lock:
            with self._condition:
                armed = self._queue.armed()
            self._on_change(armed)


def load_reminders(path: Path, device_id: str) -> list[Reminder]:
    """The armed reminders kept in the state file; malformed entries are skipped."""
    raw = read_field(path, device_id, REMINDERS)
    if not isinstance(raw, dict):
        return []
    reminders = []
    for reminder_id, entry in cast(dict[str, object], raw).items():
        if not isinstance(entry, dict):
            continue
        try:
            reminders.append(parse_reminder({"reminder_id": reminder_id, **cast(dict[str, Any], entry)}))
        except PayloadError:
            continue
    return reminders


def save_reminders(path: Path, device_id: str, reminders: Sequence[Reminder]) -> None:
    """Keep ``reminders`` as the state file's armed reminders (none: the field is removed)."""
    field = {r.reminder_id: {"fire_at": r.fire_at, "message": r.message} for r in reminders}
    update_fields(path, device_id, {REMINDERS: field or None})


# Questions.


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
        _id(payload, "id"),
        _text(payload, "question"),
        tuple(cast(list[str], choices)),
        _integer(payload, "expires_at"),
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


# Documents.


def open_document(blob: str, state: DeviceState, document_id: str) -> tuple[str, str]:
    """Decrypt a pulled document (an envelope from the server); returns its filename and content."""
    try:
        sealed = base64.b64decode(blob, validate=True)
    except binascii.Error as error:
        raise DocumentError("unreadable_document", "the pulled document is not base64") from error
    try:
        plaintext = open_envelope(sealed, state.secret_key_bytes, decode_public_key(state.server_public_key))
    except (EnvelopeError, InvalidPublicKey) as error:
        raise DocumentError(
            "unreadable_document", f"cannot open the document ({type(error).__name__}: {error})"
        ) from error
    try:
        payload: object = json.loads(plaintext.decode("utf-8"))
    except ValueError as error:  # not UTF-8, or not JSON
        raise DocumentError("unreadable_document", "the document is not UTF-8 JSON") from error
    if not isinstance(payload, dict) or payload.get("type") != "document":
        raise DocumentError("unreadable_document", "the envelope does not hold a document")
    fields = cast(dict[str, Any], payload)
    if fields.get("document_id") != document_id:
        raise DocumentError("unreadable_document", "the envelope holds another document")
    filename, content = fields.get("filename"), fields.get("content")
    if not isinstance(filename, str) or not isinstance(content, str):
        raise DocumentError("unreadable_document", "the document lacks its filename or content")
    return filename, content


def safe_filename(raw: str) -> str:
    """The filename made safe again, as the server did (``core.domain.filenames``); refused if it
    cannot be (``unsafe_filename``)."""
    try:
        return sanitize_filename(raw)
    except UnsafeFilenameError as error:
        raise DocumentError("unsafe_filename", f"refused {one_line(raw)!r}: {error}") from error


def numbered_names(name: str, limit: int = MAX_COPIES) -> Iterator[str]:
    """``name``, then ``stem (1).ext``, ``stem (2).ext`` … up to ``limit``."""
    yield name
    stem, dot, extension = name.rpartition(".")
    if not dot:
        stem, extension = name, ""
    for number in range(1, limit + 1):
        yield f"{stem} ({number}){dot}{extension}"


def save_document(folder: Path, name: str, content: str) -> Path:
    """Write ``content`` (UTF-8) as ``name`` in ``folder`` — or the first free numbered name — and
    return the path.

    Atomic: the bytes go to a hidden temporary file (mode 0600, synced) beside the target, which is
    then given its final name in one step, so a partly written document is never visible. That step
    never replaces an existing file: a hard link (``os.link`` fails if the name exists, even if
    another process just took it); on a file system without hard links, ``os.replace`` onto a name
    checked to be free.
    """
    if not name or Path(name).name != name or name in (".", ".."):
        raise DocumentError("unsafe_filename", f"{name!r} is not a plain file name")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = folder / f".{name}.{secrets.token_hex(6)}.part"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temporary, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content.encode("utf-8", "replace"))
            handle.flush()
            os.fsync(handle.fileno())
        return place_file(temporary, folder, name)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def place_file(temporary: Path, folder: Path, name: str) -> Path:
    """Give the finished ``temporary`` file (in ``folder``) its name, or the first free numbered one,
    never replacing an existing file; returns the final path."""
    for candidate in numbered_names(name, MAX_COPIES):
        target = folder / candidate
        try:
            os.link(temporary, target)
        except FileExistsError:
            continue
        except OSError:  # no hard links here (some network and FAT file systems)
            if os.path.lexists(target):
                continue
            os.replace(temporary, target)
        return target
    raise DocumentError("no_free_name", f"{MAX_COPIES} files named like {name!r} exist already")


# The phone's side of the API.


@dataclass(frozen=True, slots=True)
class Answered:
    interaction_id: str
    status: str
    choice_index: int | None


class PhoneApi(RelayboxApi):
    """The routes a phone uses for questions and documents (device credential)."""

    def answer_interaction(self, interaction_id: str, choice_index: int) -> Answered:
        """``POST /v1/interactions/{id}/answer``: 409 ``already_answered`` / ``interaction_expired``,
        404 ``not_found`` and 400 ``invalid_choice`` become ``ApiError``."""
        path = f"/v1/interactions/{_path_segment(interaction_id)}/answer"
        raw = self._call("POST", path, body={"choice_index": choice_index})
        fields = raw if isinstance(raw, dict) else {}
        status, index = fields.get("status"), fields.get("choice_index")
        if not isinstance(status, str) or not (index is None or isinstance(index, int)):
            raise ApiError(200, "invalid_response", "the answer's outcome lacks its status")
        return Answered(interaction_id, status, index)

    def pull_document(self, document_id: str) -> str:
        """``GET /v1/documents/{id}``: the document's envelope, base64; the server then forgets it."""
        raw = self._call("GET", f"/v1/documents/{_path_segment(document_id)}")
        blob = raw.get("blob") if isinstance(raw, dict) else None
        if not isinstance(blob, str):
            raise ApiError(200, "invalid_response", "the pulled document has no blob")
        return blob


def _path_segment(value: str) -> str:
    if not _ID.fullmatch(value):
        raise ClientError("invalid_id", f"{one_line(value)!r} is not an id")
    return quote(value, safe="")


# Wiring it into `relaybox phone run`.


class PhoneOps:
    """The phone's handlers for ``relaybox phone run``. A context manager: entering re-arms the
    reminders kept in the state file (firing those already due) and starts the reminder thread
    and, when ``interactive``, the reader of typed answers on ``stdin_fd``.

    ``answer``: answer every question with that choice. ``downloads``: where documents go
    (default: ``Downloads`` beside the state file). ``install`` adds the handlers to a
    ``Dispatcher``; each prints its own results through ``output`` and returns ``""``.
    """

    def __init__(
        self,
        path: Path,
        state: DeviceState,
        output: Output,
        *,
        answer: int | None = None,
        interactive: bool = False,
        downloads: Path | None = None,
        clock: Callable[[], float] = time.time,
        transport: httpx.BaseTransport | None = None,
        stdin_fd: int = 0,
    ) -> None:
        self.path = path
        self.state = state
        self.output = output
        self.answer = answer
        self.interactive = interactive and answer is None
        self.downloads = downloads if downloads is not None else path.parent / DOWNLOADS_DIR
        self._clock = clock
        self._api = PhoneApi(state.server, state.device_token, transport=transport)
        self._stdin_fd = stdin_fd
        self._pending: list[Question] = []
        self._pending_lock = threading.Lock()
        self.reader: threading.Thread | None = None  # reads typed answers until stdin ends
        self.reminders = ReminderScheduler(
            self._fire, clock=clock, on_change=self._save_reminders, on_error=self._thread_failed
        )

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> None:
        kept = load_reminders(self.path, self.state.device_id)
        if kept:
            soonest = min(kept, key=lambda reminder: reminder.fire_at)
            self.output.note(
                f"re-armed {len(kept)} reminder{'s' * (len(kept) != 1)} (next due {_when(soonest.fire_at)})"
            )
        self.reminders.restore(kept)
        self.reminders.start()
        if self.interactive and self.reader is None:
            self.reader = threading.Thread(target=self._read_answers, name="relaybox-answers", daemon=True)
            self.reader.start()

    def close(self) -> None:
        self.reminders.close()
        self._api.close()

    def install(self, dispatcher: Dispatcher) -> Dispatcher:
        dispatcher.pushes.update(
            {
                "reminder": self.on_reminder,
                "reminder_cancel": self.on_reminder_cancel,
                "ring": self.on_ring,
                "document": self.on_document,
            }
        )
        dispatcher.payloads["interaction_request"] = self.on_question
        return dispatcher

    # Reminders.

    def on_reminder(self, item: Received) -> str:
        try:
            reminder = parse_reminder(_content(item, "reminder"))
        except PayloadError as error:
            return one_line(f"reminder push that cannot be read: {error}")
        self.output.show(
            f"REMINDER SET [{one_line(reminder.reminder_id)}] for {_when(reminder.fire_at)}: "
            f"{one_line(reminder.message)}",
            {
                "type": "reminder_set",
                "reminder_id": reminder.reminder_id,
                "fire_at": reminder.fire_at,
                "message": reminder.message,
            },
        )
        self.reminders.arm(reminder)
        return ""

    def on_reminder_cancel(self, item: Received) -> str:
        try:
            reminder_id = _id(_content(item, "reminder_cancel"), "reminder_id")
        except PayloadError as error:
            return one_line(f"reminder_cancel push that cannot be read: {error}")
        cancelled = self.reminders.cancel(reminder_id)
        if cancelled is not None:  # an id that is not armed here is ignored silently
            self.output.show(
                f"REMINDER CANCELLED [{one_line(reminder_id)}]: {one_line(cancelled.message)}",
                {"type": "reminder_cancelled", "reminder_id": reminder_id, "message": cancelled.message},
            )
        return ""

    def _fire(self, reminder: Reminder) -> None:
        now = self._clock()
        self.output.show(
            f"REMINDER: {one_line(reminder.message)}",
            {
                "type": "reminder",
                "reminder_id": reminder.reminder_id,
                "fire_at": reminder.fire_at,
                "message": reminder.message,
                "fired_at": round(now, 3),
            },
        )
        self.output.bell()
        if now - reminder.fire_at >= LATE_NOTE_S:
            self.output.note(
                f"reminder {reminder.reminder_id} was due {_when(reminder.fire_at)}, while the phone was off"
            )

    def _save_reminders(self, armed: list[Reminder]) -> None:
        try:
            save_reminders(self.path, self.state.device_id, armed)
        except (OSError, ValueError) as error:
            self.output.note(f"warning: cannot keep the armed reminders in {self.path}: {error}")

    def _thread_failed(self, error: Exception) -> None:
        with contextlib.suppress(Exception):  # the output itself may be what failed (a closed pipe)
            self.output.note(f"warning: reminder thread: {type(error).__name__}: {error}")

    # Questions.

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

    # Ring.

    def on_ring(self, item: Received) -> str:
        raw = item.payload.get("durationS")
        text = str(raw) if raw is not None else "?"
        duration = int(text) if text.isascii() and text.isdigit() else None
        self.output.show(f"RING for {one_line(text)} s", {"type": "ring", "duration_s": duration})
        self.output.bell()
        return ""

    # Documents.

    def on_document(self, item: Received) -> str:
        document_id = item.payload.get("documentId")
        if not isinstance(document_id, str) or not _ID.fullmatch(document_id):
            return one_line(f"document push without a usable documentId: {document_id!r}")
        try:
            filename, content = open_document(self._api.pull_document(document_id), self.state, document_id)
            name = safe_filename(filename)
            saved = save_document(self.downloads, name, content)
        except ClientError as error:
            refused = error.code == "unsafe_filename"
            self.output.show(
                f"DOCUMENT {'REFUSED' if refused else 'FAILED'} [{document_id}]: "
                f"{error.code}: {one_line(error.message)}",
                {
                    "type": "document_refused" if refused else "document_failed",
                    "document_id": document_id,
                    "code": error.code,
                    "message": error.message,
                },
            )
            return ""
        except OSError as error:
            message = f"cannot write into {self.downloads}: {error.strerror or error}"
            self.output.show(
                f"DOCUMENT FAILED [{document_id}]: os_error: {one_line(message)}",
                {
                    "type": "document_failed",
                    "document_id": document_id,
                    "code": "os_error",
                    "message": message,
                },
            )
            return ""
        self.output.show(
            f"SAVED {one_line(saved)}",
            {"type": "saved", "document_id": document_id, "filename": saved.name, "path": str(saved)},
        )
        return ""


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


# Helpers.


def _content(item: Received, kind: str) -> dict[str, Any]:
    """A push's inline payload (or an envelope's payload), checked to be of type ``kind``."""
    content = item.inline if item.event == "push" else item.payload
    if content is None:
        raise PayloadError("it carries no payload")
    if content.get("type") != kind:
        raise PayloadError(f"it carries a {content.get('type')!r} payload")
    return content


def _id(payload: Mapping[str, Any], key: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise PayloadError(f"{key} is missing or not an id")
    return value


def _text(payload: Mapping[str, Any], key: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str) or not value:
        raise PayloadError(f"{key} is missing or not text")
    return value


def _integer(payload: Mapping[str, Any], key: str) -> int:
    value = payload.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise PayloadError(f"{key} is missing or not a whole number")
    return value


def _when(epoch: int) -> str:
    try:
        return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"epoch {epoch}"
