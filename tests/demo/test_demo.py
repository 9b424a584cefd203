"""``relaybox demo`` end to end, as a newcomer runs it: every tool's step is shown with what the
virtual phone did, and nothing is left behind, whether the demo finishes or is stopped."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import RELAYBOX, TRACEBACK, LineReader, child_environment

pytestmark = pytest.mark.e2e
DEMO_TIMEOUT_S = 90
TOOLS = [
    "list_devices",
    "send_notification",
    "clear_notification",
    "remind_me",
    "request_approval",
    "check_reply",
    "find_my_phone",
    "send_file",
    "cancel_reminder",
]
PHONE_LINES = [
    r"phone │ \[seq \d+\] notification: relaybox demo — Hello",
    r"phone │ \[seq \d+\] notification cleared: msg_\w+$",
    r"phone │ REMINDER: Stretch your legs$",
    r"phone │ ANSWERED \[int_\w+\] 0 \(Yes\)$",
    r"phone │ RING for \d+ s$",
    r"phone │ SAVED .+demo-notes\.md$",
    r"phone │ REMINDER CANCELLED \[rmd_\w+\]",
]


def start_demo(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*RELAYBOX, "demo", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_environment(tmp_path),
        cwd=tmp_path,
        text=True,
        encoding="utf-8",
    )


def finish(demo: subprocess.Popen[str], timeout: float) -> tuple[int, str, str]:
    """Wait for the demo to exit; past ``timeout`` stop it as Ctrl-C would (so it cleans up)."""
    try:
        stdout, stderr = demo.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        demo.send_signal(signal.SIGTERM)
        stdout, stderr = demo.communicate(timeout=20)
        pytest.fail(f"`relaybox demo` did not finish within {timeout} s:\n{stdout}\n{stderr}")
    return demo.returncode, stdout, stderr


def temporary_folder(stdout: str) -> Path:
    match = re.search(r"^temporary folder: (.+)$", stdout, re.MULTILINE)
    assert match, stdout
    return Path(match[1])


def processes_using(folder: Path) -> list[str]:
    """Command lines of running processes that name ``folder`` (the demo's server and phone do)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(folder) in text:
            found.append(text)
    return found


def test_the_demo_calls_every_tool_and_shows_what_the_phone_did(tmp_path: Path) -> None:
    demo = start_demo(tmp_path)
    returncode, stdout, stderr = finish(demo, DEMO_TIMEOUT_S)

    assert returncode == 0, f"{stdout}\n{stderr}"
    for tool in TOOLS:
        assert re.search(rf"^\[\d+/12\] {tool}:", stdout, re.MULTILINE), f"no step for {tool}:\n{stdout}"
    for line in PHONE_LINES:
        assert re.search(line, stdout, re.MULTILINE), f"the phone printed no {line!r}:\n{stdout}"
    assert re.search(r'consent page: "relaybox demo" asks to connect; it shows the code \d{3} \d{3}', stdout)
    assert "phone │ confirmed: relaybox demo asks to connect to this phone" in stdout
    assert "All 12 steps worked" in stdout
    assert TRACEBACK not in stdout + stderr
    assert stderr == ""
    assert not temporary_folder(stdout).exists()


def test_a_stopped_demo_stops_the_server_and_phone_and_removes_its_folder(tmp_path: Path) -> None:
    if not Path("/proc/self/cmdline").exists():
        pytest.skip("needs /proc to look for leftover processes")
    demo = start_demo(tmp_path)
    assert demo.stdout is not None
    reader = LineReader(demo.stdout)
    deadline = time.monotonic() + 60
    while (line := reader.next_line(deadline)) is not None and not line.startswith("[4/12]"):
        pass
    assert line is not None, "".join(reader.lines)
    folder = temporary_folder("".join(reader.lines))
    assert processes_using(folder)  # the server and the phone run

    demo.send_signal(signal.SIGTERM)  # handled as Ctrl-C is (SIGINT may be ignored where tests run)
    try:
        returncode = demo.wait(30)
    finally:
        if demo.poll() is None:
            demo.kill()
    stdout = reader.close()
    assert demo.stderr is not None
    stderr = demo.stderr.read()
    demo.stderr.close()

    assert returncode == 130, f"{stdout}\n{stderr}"
    assert re.fullmatch(r"error: demo: interrupted \(step \d+: [^)]+\)\n", stderr), stderr
    assert TRACEBACK not in stdout + stderr
    assert not folder.exists()
    assert processes_using(folder) == []
