"""The demo's child processes: the server and the virtual phone, started as the real ``relaybox``
commands are (this interpreter running ``app.cli``), their output read on threads, and stopped in
order at the end. ``Stage`` is also the ``PhoneSide`` the steps drive the phone through."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import anyio

from demo.narration import DemoError, Narrator

ROOT = Path(__file__).resolve().parent.parent
RELAYBOX = [sys.executable, "-m", "app.cli"]
LISTENING = re.compile(r"^relaybox is listening on (http://\S+)$")
STOP_TIMEOUT_S = 5.0


class Stage:
    """The demo's processes: the server and the virtual phone, with their output drained on threads.

    The children run in their own process group, so a Ctrl-C reaches the demo alone, which then
    stops them in order."""

    def __init__(self, workdir: Path, say: Narrator) -> None:
        self.workdir = workdir
        self.say = say
        self.state = workdir / "phone.json"
        self.log = workdir / "server.log"
        self.lines: list[str] = []
        self.quiet = False
        self.env = {key: value for key, value in os.environ.items() if not key.startswith("RELAYBOX_")}
        self.env.update(
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), self.env.get("PYTHONPATH")])),
            PYTHONIOENCODING="utf-8",
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        self._processes: list[subprocess.Popen[str]] = []
        self._threads: list[threading.Thread] = []
        self._log: IO[str] | None = None
        self._phone: subprocess.Popen[str] | None = None

    def _start(self, args: list[str], env: dict[str, str], stderr: IO[str] | int) -> subprocess.Popen[str]:
        process = subprocess.Popen(  # noqa: S603 - this interpreter running relaybox itself
            [*RELAYBOX, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=self.workdir,  # away from any .env file of the current folder
            text=True,
            encoding="utf-8",
            errors="replace",
            process_group=0,
        )
        self._processes.append(process)
        return process

    def _drain(self, stream: IO[str], each: Callable[[str], None]) -> None:
        def run() -> None:
            with contextlib.suppress(ValueError, OSError):
                for line in stream:
                    each(line.rstrip("\n"))

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self._threads.append(thread)

    def start_server(self, deadline: float) -> str:
        self.say.step("Starting the server on a temporary SQLite file", "starting the server")
        data = self.workdir / "data"
        args = ["serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data)]
        self.say.say(f"relaybox {' '.join(args)}")
        self.say.say("with RELAYBOX_REMINDER_MIN_LEAD_S=5, so a reminder may be set 5 s ahead (normally 60)")
        env = self.env | {"RELAYBOX_REMINDER_MIN_LEAD_S": "5"}
        log = self._log = self.log.open("a", encoding="utf-8")
        server = self._start(args, env, stderr=log)
        assert server.stdout is not None
        first: list[str] = []
        ready = threading.Event()

        def keep(line: str) -> None:
            if not first:
                first.append(line)
                ready.set()
            log.write(line + "\n")
            log.flush()

        self._drain(server.stdout, keep)
        while not ready.wait(0.1):
            if server.poll() is not None or time.monotonic() > deadline:
                break
        match = LISTENING.match(first[0]) if first else None
        if match is None:
            ready.wait(0.5)  # an early exit: let the reader catch what was printed
            got = first[0] if first else ("nothing" if server.poll() is None else f"exit {server.returncode}")
            raise DemoError(f"the server did not start (its first output: {got})")
        self.say.say(f"listening on {match[1]}; its log goes to {self.log.name} in the temporary folder")
        return match[1]

    def start_phone(self, server: str, deadline: float) -> None:
        self.say.step("Registering a virtual phone and starting it", "starting the phone")
        env = self.env | {"RELAYBOX_SERVER": server}
        name = ["--name", "Demo phone"]
        register = ["phone", "register", *name, "--app-build", "1", "--state", str(self.state)]
        self.say.say(f"relaybox {' '.join(register)}".replace("Demo phone", '"Demo phone"'))
        try:
            done = subprocess.run(  # noqa: S603 - this interpreter running relaybox itself
                [*RELAYBOX, *register],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env=env,
                cwd=self.workdir,
                text=True,
                encoding="utf-8",
                errors="replace",
                timeout=max(deadline - time.monotonic(), 0.1),
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise TimeoutError from None
        for line in done.stdout.splitlines():
            if not line.startswith("next:"):  # how to pair a computer: not part of this demo
                self.say.phone(line)
        if done.returncode != 0:
            raise DemoError(f"registering the phone failed: {done.stderr.strip() or done.returncode}")
        downloads = self.workdir / "Downloads"
        run = ["phone", "run", "--answer", "0", "--downloads", str(downloads), "--state", str(self.state)]
        self.say.say(f"relaybox {' '.join(run)}")
        self.say.say("in the background; it prints what the phone does, and taps the first answer (0)")
        phone = self._phone = self._start(run, env, stderr=subprocess.STDOUT)
        assert phone.stdout is not None
        self._drain(phone.stdout, self._phone_line)
        while not any(line.startswith("following ") for line in self.lines):
            if phone.poll() is not None:
                raise DemoError(f"the phone stopped (exit {phone.returncode})")
            if time.monotonic() > deadline:
                raise TimeoutError
            time.sleep(0.05)

    def _phone_line(self, line: str) -> None:
        if not self.quiet:
            self.say.phone(line)
            self.lines.append(line)

    # PhoneSide, for the steps.

    def mark(self) -> int:
        return len(self.lines)

    async def wait_for(self, pattern: str, since: int, within: float = 15) -> re.Match[str]:
        wanted = re.compile(pattern)
        with anyio.move_on_after(within):
            while True:
                fresh = self.lines[since:]
                for line in fresh:
                    if match := wanted.search(line):
                        return match
                since += len(fresh)
                if self._phone is not None and self._phone.poll() is not None:
                    raise DemoError(f"the phone stopped (exit {self._phone.returncode})")
                await anyio.sleep(0.05)
        raise DemoError(f"the phone printed no line like {pattern!r} within {within:g} s")

    async def connect(self, code: str) -> str:
        self.say.say(f"typing the code into the phone: relaybox phone connect {code}")
        done = await anyio.run_process(
            [*RELAYBOX, "phone", "connect", code, "--state", str(self.state)],
            env=self.env,
            cwd=self.workdir,
            check=False,
        )
        output = done.stdout.decode("utf-8", "replace")
        for line in output.splitlines():
            self.say.phone(line)
        if done.returncode != 0:
            error = done.stderr.decode("utf-8", "replace").strip().removeprefix("error: ")
            raise DemoError(f"the phone could not confirm the code: {error or done.returncode}")
        return output

    def stop(self) -> None:
        """Stop the phone, then the server (SIGTERM, then SIGKILL); idempotent."""
        self.quiet = True
        for process in reversed(self._processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(STOP_TIMEOUT_S)
        for thread in self._threads:
            thread.join(STOP_TIMEOUT_S)
        for process in self._processes:
            if process.stdout is not None:
                process.stdout.close()
        if self._log is not None:
            self._log.close()
