"""The parts of ``longpoll.py`` that talk to the server: the accounts and their questions, the
waiting polls (one connection each, every response checked), waiting until the server holds them
all and is quiet, and the answers sent at a steady pace.

The scripts import it as ``polls`` (``bench/`` is on ``sys.path``); it is not a benchmark.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass

import checks
from devices import mint_sender_token, register_phone
from harness import BenchError, Server
from http1 import Connection, Pool, http_request
from lifecycle import Progress
from loadgen import bounded

QUIET_CPU_S = 0.01  # server CPU over one QUIET_WINDOW_S that counts as "every poll is waiting"
QUIET_WINDOW_S = 0.25
QUIET_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Account:
    device_token: str  # the phone's credential: it answers
    sender_token: str  # the script's token: it asks and polls


@dataclass(frozen=True)
class Question:
    interaction_id: str
    account: Account
    choice: int


def answered(body: object, question: Question) -> bool:
    """An interaction answered with the question's choice."""
    return (
        not checks.wrong_in(body, checks.INTERACTION)
        and isinstance(body, dict)
        and body["id"] == question.interaction_id
        and body["status"] == "answered"
        and body.get("choice_index") == question.choice
    )


async def set_up(
    pool: Pool, polls: int, per_account: int, concurrency: int, progress: Progress
) -> list[Question]:
    """Register ceil(polls / per_account) phones, give each a sender token, ask the questions."""
    count = math.ceil(polls / per_account)
    accounts: list[Account | None] = [None] * count
    progress.start(f"registering {count} phones with a sender token each", count)

    async def register(index: int) -> None:
        phone = await register_phone(pool, f"bench {index}")
        accounts[index] = Account(phone.token, await mint_sender_token(pool, phone.token))
        progress.step()

    await bounded(count, concurrency, register)
    questions: list[Question | None] = [None] * polls
    progress.start("asking the questions", polls)

    async def ask(index: int) -> None:
        account = accounts[index // per_account]
        assert account is not None
        body = {"question": f"bench question {index}: deploy?", "choices": ["Approve", "Deny"]}
        created, _, _ = await pool.call(
            "POST", "/v1/interactions", account.sender_token, body, 201, checks.INTERACTION_CREATED
        )
        if created["status"] != "pending" or not created["created"]:
            raise BenchError(f"POST /v1/interactions: not a new pending question: {created}")
        questions[index] = Question(str(created["id"]), account, index % 2)
        progress.step()

    await bounded(polls, concurrency, ask)
    return [question for question in questions if question is not None]


@dataclass
class Poll:
    question: Question
    connection: Connection | None = None
    task: asyncio.Task[None] | None = None
    answer_sent: float | None = None  # perf_counter just before the answer's POST was written
    answer_done: float | None = None  # its 200 read
    returned: float | None = None  # the poll's whole response read
    problem: str | None = None


async def open_poll(server: Server, poll: Poll, wait: int, timeout_s: float) -> None:
    """Connect, write ``GET /v1/interactions/{id}?wait=``, and leave a task reading the response."""
    poll.connection = await Connection.open(server.address)
    path = f"/v1/interactions/{poll.question.interaction_id}?wait={wait}"
    host = f"{server.address[0]}:{server.address[1]}"
    poll.connection.write(http_request("GET", path, host, poll.question.account.sender_token))
    poll.task = asyncio.create_task(read_poll(poll, timeout_s))


async def read_poll(poll: Poll, timeout_s: float) -> None:
    assert poll.connection is not None
    try:
        status, body = await poll.connection.response(timeout_s)
        poll.returned = time.perf_counter()
    except BenchError as exc:
        poll.problem = f"poll: {exc}"
        return
    finally:
        poll.connection.close()
    if status != 200 or not answered(body, poll.question):
        poll.problem = f"poll answered {status} {json.dumps(body)[:200]}"
    elif poll.answer_sent is None:
        poll.problem = "poll returned before its answer was sent"


async def wait_for_steady_fds(server: Server) -> None:
    """Until the server's open file count stops changing (the setup connections are closed)."""
    deadline = time.monotonic() + QUIET_TIMEOUT_S
    last = server.open_fds()
    while time.monotonic() < deadline:
        await asyncio.sleep(QUIET_WINDOW_S)
        now = server.open_fds()
        if now == last:
            return
        last = now
    raise BenchError(f"the server's open files did not settle within {QUIET_TIMEOUT_S:.0f} s")


async def wait_until_polls_wait(server: Server, fds_before: int, polls: int, progress: Progress) -> None:
    """Until the server holds every poll's connection and its CPU is quiet: each poll has been read
    and checked and is waiting. Bounded by QUIET_TIMEOUT_S."""
    progress.start("waiting for the server to settle", polls)
    deadline = time.monotonic() + QUIET_TIMEOUT_S
    cpu = server.cpu_s()
    while time.monotonic() < deadline:
        await asyncio.sleep(QUIET_WINDOW_S)
        now_cpu = server.cpu_s()
        progress.done = max(0, server.open_fds() - fds_before)
        if progress.done >= polls and now_cpu - cpu <= QUIET_CPU_S:
            return
        cpu = now_cpu
    raise BenchError(f"the server did not settle within {QUIET_TIMEOUT_S:.0f} s ({progress.describe()})")


async def answer_all(pool: Pool, polls: list[Poll], rate: float, progress: Progress) -> None:
    """Answer every question in order, one every 1/rate s (each answer its own task, so a slow
    answer does not delay the next); every answer must say the question is answered so."""
    progress.start(f"answering at {rate:g}/s", len(polls))
    started = time.perf_counter()

    async def answer(poll: Poll) -> None:
        question = poll.question
        path = f"/v1/interactions/{question.interaction_id}/answer"
        body = {"choice_index": question.choice}
        # The poll may be read before the call returns: mark the send time before the call.
        poll.answer_sent = time.perf_counter()
        done, sent, poll.answer_done = await pool.call(
            "POST", path, question.account.device_token, body, 200, checks.INTERACTION
        )
        if not answered(done, question):
            raise BenchError(f"POST {path}: not answered with choice {question.choice}: {done}")
        poll.answer_sent = sent
        progress.step()

    async with asyncio.TaskGroup() as group:
        for index, poll in enumerate(polls):
            delay = started + index / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            group.create_task(answer(poll))
