"""``relaybox demo``: a server on a temporary SQLite file, a virtual phone, and an MCP client that
connects through the full OAuth flow (the phone confirms the consent code) and calls every tool,
narrating each step. Everything runs as the real commands do, in subprocesses, and everything is
stopped and removed at the end, also after a failure or Ctrl-C.

This module runs it from start to end (the time limit, Ctrl-C, the outcome in one line, the summary);
``demo.processes`` starts and stops the server and the phone, ``demo.steps`` is the assistant's side.
"""

from __future__ import annotations

import io
import logging
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

import anyio

from demo.narration import DemoError, Narrator, describe
from demo.processes import Stage
from demo.steps import connect_and_call_every_tool

STEPS = 12
EXIT_INTERRUPTED = 130
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_demo(*, keep: bool, timeout: float) -> int:
    """Run the demo; 0 when every step worked, 1 (one ``error:`` line) or 130 (Ctrl-C) otherwise."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="replace")  # a terminal without UTF-8 gets "?" for "│" and "→"
    # The SDK logs a failed OAuth flow with its traceback; the demo reports it in one line instead.
    logging.getLogger("mcp").addHandler(logging.NullHandler())
    logging.getLogger("mcp").propagate = False
    say = Narrator(STEPS)
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="relaybox-demo-"))
    stage = Stage(workdir, say)
    code, failure = 0, ""
    try:
        say.line(
            "relaybox demo: a server, a virtual phone and an AI assistant's MCP client, on this computer"
        )
        say.line(f"temporary folder: {workdir}")
        server = stage.start_server(started + timeout)
        stage.start_phone(server, started + timeout)
        anyio.run(_assistant, server, stage, say, started + timeout - time.monotonic())
    except BaseException as error:  # Ctrl-C included: every way out stops what the demo started
        code, failure = _outcome(error, timeout)
    finally:
        for sig in STOP_SIGNALS:  # a second Ctrl-C must not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        stage.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if code:
        where = f" (step {say.number}: {say.name})" if say.number else ""
        print(f"error: demo: {' '.join(failure.split())}{where}", file=sys.stderr, flush=True)
        if code != EXIT_INTERRUPTED:
            kept = f"the logs are kept in {workdir}" if keep else "run it with --keep to keep the logs"
            print(f"everything the demo started is stopped; {kept}", file=sys.stderr, flush=True)
        return code
    _summary(say, workdir, keep, time.monotonic() - started)
    return 0


def _outcome(error: BaseException, timeout: float) -> tuple[int, str]:
    """The exit status and the one-line reason for ``error`` (the SDK's task groups may wrap it)."""
    leaves = _leaves(error)
    if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
        return EXIT_INTERRUPTED, "interrupted"
    reasons = [str(leaf) for leaf in leaves if isinstance(leaf, DemoError)]
    if reasons:
        return 1, reasons[0]
    if any(isinstance(leaf, TimeoutError) for leaf in leaves):
        return 1, f"timed out after {timeout:g} s"
    return 1, describe(leaves[0])


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


async def _assistant(server: str, stage: Stage, say: Narrator, remaining: float) -> None:
    """The MCP client's steps; Ctrl-C and SIGTERM cancel them (and raise ``KeyboardInterrupt``
    after), since a signal handler raising inside the event loop would leave it in disorder."""
    interrupted = False
    async with anyio.create_task_group() as group:

        async def watch_signals() -> None:
            nonlocal interrupted
            with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
                async for _ in signals:
                    interrupted = True
                    group.cancel_scope.cancel()

        group.start_soon(watch_signals)
        with anyio.fail_after(max(remaining, 0.1)):
            await connect_and_call_every_tool(server, stage, say)
        group.cancel_scope.cancel()
    if interrupted:
        raise KeyboardInterrupt


def _summary(say: Narrator, workdir: Path, keep: bool, elapsed: float) -> None:
    folder = f"is kept: {workdir}" if keep else "is removed (--keep keeps it)"
    for text in (
        f"\nAll {STEPS} steps worked in {elapsed:.1f} s: a server on a temporary SQLite file, a virtual",
        "phone, and an MCP client that connected through OAuth (the phone confirmed the consent",
        "code) and called 9 of its 11 tools, each one seen arriving on the phone.",
        f"The server and the phone are stopped; the temporary folder {folder}",
        "\nThe real thing (README.md):",
        "  python3 dev.py serve                                 # the server, its data in .relaybox/",
        '  .venv/bin/relaybox phone register --name "My phone"  # a virtual phone (or the app)',
        "  .venv/bin/relaybox phone run                         # the phone listens",
        "  then give your AI assistant the connector URL http://127.0.0.1:8787/mcp",
        "  (an assistant on the web needs the https address: RELAYBOX_PUBLIC_URL + /mcp)",
    ):
        say.line(text)
