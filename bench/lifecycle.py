"""The frame every benchmark run has: a work dir, the servers it starts (stopped whatever happens), a
deadline, the phase it is in (so a failure says where it stopped), the exit status, the clean-up and
what it says about the servers at the end.

Exit statuses: 0 measured (goals met or not), 1 a goal missed with ``--strict``, 2 the run itself
failed (a server error, a wrong answer, the deadline). The scripts import this as ``lifecycle``
(``bench/`` is on ``sys.path``); it is not a benchmark.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from harness import STARTUP_TIMEOUT_S, BenchError, Server, start_server
from meter import machine_note


@dataclass
class Progress:
    """What the run is doing, so a deadline or an error can say where it stopped."""

    phase: str = "starting"
    done: int = 0
    total: int = 0
    errors: list[str] = field(default_factory=list)

    def start(self, phase: str, total: int = 0) -> None:
        self.phase, self.done, self.total = phase, 0, total
        print(f"... {phase}" + (f" ({total})" if total else ""), flush=True)

    def step(self) -> None:
        self.done += 1

    def fail(self, what: str) -> None:
        self.errors.append(f"{self.phase}: {what}")

    def describe(self) -> str:
        return f"{self.phase}: {self.done}/{self.total} done" if self.total else self.phase


@dataclass
class Run:
    """One benchmark run: its options, work dir, servers, clean-ups and deadline."""

    args: argparse.Namespace
    work_dir: Path
    deadline: float  # time.monotonic()
    servers: list[Server] = field(default_factory=list)
    cleanup: ExitStack = field(default_factory=ExitStack)  # closed after the servers stopped
    progress: Progress = field(default_factory=Progress)

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return left

    def start(
        self, name: str, command: list[str], settings: Mapping[str, str], fd_limit: int | None = None
    ) -> Server:
        """Start a server (stopped at the end of the run whatever happens)."""
        self.progress.start(f"starting {name}")
        timeout = min(STARTUP_TIMEOUT_S, self.remaining())
        server = start_server(name, command, self.work_dir, timeout, settings, fd_limit=fd_limit)
        self.servers.append(server)
        print(f"    {name}: pid {server.pid} at {server.url}", flush=True)
        return server

    def machine_note(self) -> None:
        """Say how busy the machine is before measuring (this run's own processes left out)."""
        print(f"machine: {machine_note([server.pid for server in self.servers])}", flush=True)


def run_bench(
    args: argparse.Namespace,
    prefix: str,
    body: Callable[[Run], bool],
    say: Callable[[Server, bool], None] | None = None,
    errors: tuple[type[BaseException], ...] = (),
) -> int:
    """Run ``body`` (True: every goal met) in a fresh work dir under ``args.deadline``, then stop the
    servers, close the clean-ups, remove the work dir (unless ``args.keep``); the exit status."""
    stop_on_sigterm()
    print(code_note(), flush=True)
    run = Run(args, Path(tempfile.mkdtemp(prefix=prefix)), time.monotonic() + args.deadline)
    outcome = 2  # the run failed unless it gets as far as the report
    failures: tuple[type[BaseException], ...] = (BenchError, OSError, ExceptionGroup, *errors)
    try:
        met = body(run)
        outcome = 1 if args.strict and not met else 0
    except TimeoutError:
        print(f"FAILED: the deadline of {args.deadline:.0f} s was reached during {run.progress.describe()}")
    except failures as exc:
        print(f"FAILED during {run.progress.describe()}: {describe(exc)}")
    finally:
        if run.progress.errors:
            print(f"{len(run.progress.errors)} error(s), first: {run.progress.errors[:3]}")
        stop_servers(run.servers, say or health)
        run.cleanup.close()
        if args.keep:
            print(f"kept {run.work_dir} (server logs in {run.work_dir / 'logs'})")
        else:
            shutil.rmtree(run.work_dir, ignore_errors=True)
    return outcome


def code_note() -> str:
    """The commit measured, and how many files of the server's code differ from it (uncommitted)."""
    here = Path(__file__).resolve().parent.parent

    def git(*command: str) -> str:
        done = subprocess.run(["git", *command], cwd=here, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    changed = git("status", "--porcelain", "--", "core", "app", "connector", "oauth").splitlines()
    dirty = f", {len(changed)} server file(s) changed and not committed" if changed else ", clean"
    return f"code: commit {git('rev-parse', '--short', 'HEAD') or '?'}{dirty}"


def goal(what: str, met: bool, measured: str) -> bool:
    """Print a goal line: what it asks, met or MISSED, and what was measured; returns ``met``."""
    print(f"goal: {what}: {'met' if met else 'MISSED'} ({measured})")
    return met


def print_rows(rows: list[tuple[str, str]]) -> None:
    """A two-column summary: labels left, values right."""
    print()
    for label, value in rows:
        print(f"{label:<32} {value:>30}")


def add_common_arguments(parser: argparse.ArgumentParser, deadline: float) -> None:
    parser.add_argument("--deadline", type=float, default=deadline, help="seconds for the whole run")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (data and server logs)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal is missed")


def health(server: Server, was_alive: bool) -> None:
    """Say how a server fared: alive to the end, failed answers in its access log, tracebacks."""
    state = "ran to the end" if was_alive else f"DIED before the end (exit {server.process.returncode})"
    failed = server.count_in_log(r'HTTP/1\.1" [45]\d\d ', "stdout")
    tracebacks = server.count_in_log(r"^Traceback", "stderr")
    print(f"{server.name}: {state}; 4xx/5xx in its access log: {failed}; tracebacks in its log: {tracebacks}")
    if tracebacks or not was_alive:
        print(f"--- {server.name} stderr (tail) ---")
        print(server.stderr_tail())


def stop_servers(servers: list[Server], say: Callable[[Server, bool], None] = health) -> None:
    """Stop every server (SIGTERM, then SIGKILL), then ``say`` how each fared."""
    alive = [server.alive() for server in servers]
    for server in servers:
        server.stop()
    for server, was_alive in zip(servers, alive, strict=True):
        say(server, was_alive)


def stop_on_sigterm() -> None:
    """On SIGTERM, say so and exit 2 through the ``finally`` that stops the servers."""

    def on_sigterm(_signum: int, _frame: object) -> NoReturn:
        print("FAILED: interrupted by SIGTERM; stopping the servers", flush=True)
        raise SystemExit(2)

    signal.signal(signal.SIGTERM, on_sigterm)


def describe(exc: BaseException) -> str:
    """The first leaf of an exception group, or the exception itself, with up to four causes."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    causes: list[str] = []
    cause = exc.__cause__ or exc.__context__
    while cause is not None and len(causes) < 4:
        causes.append(f"{type(cause).__module__}.{type(cause).__name__}: {cause!r}")
        cause = cause.__cause__ or cause.__context__
    return f"{type(exc).__name__}: {exc}" + "".join(f"\n  caused by {c}" for c in causes)
