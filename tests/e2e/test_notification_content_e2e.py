"""Acceptance: the virtual phone (``relaybox phone run``) against a real ``relaybox serve`` shows a
long task's notification progressing in place (``replaces``), its clear, tags as emoji, the
Markdown source marked as such, the link, the icon and every button; a computer (``relaybox tail``)
shows the same, and a clear meant for the computer alone never reaches the phone."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import BackgroundCli, Cli
from tests.e2e.test_phone_ops_e2e import HTTP_TIMEOUT_S, ok, stop

pytestmark = pytest.mark.e2e

CODE_LINE = re.compile(r"^pairing code: ([0-9]{6})$")
HOOK = "https://hooks.example/rollback"


@pytest.fixture
def caller(cli: Cli, tmp_path: Path) -> Iterator[httpx.Client]:
    """A registered virtual phone, and an HTTP client with a sender token of its account."""
    ok(cli.run("phone", "register", "--name", "Pixel"))
    token = ok(cli.run("phone", "tokens", "create", "--label", "e2e")).stdout.strip()
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(
        base_url=cli.server_url, headers=headers, timeout=HTTP_TIMEOUT_S, trust_env=False
    ) as http:
        yield http


def send(http: httpx.Client, **fields: object) -> dict[str, object]:
    sent = http.post("/v1/send", json=fields)
    assert sent.status_code == 200, sent.text
    return dict(sent.json())


def line(run: BackgroundCli, text: str) -> str:
    """The next line of ``run`` that is exactly ``[seq N] text``."""
    return run.wait_for_line(re.compile(r"^\[seq \d+\] " + re.escape(text) + "$"))[0]


def next_lines(run: BackgroundCli, expected: list[str]) -> None:
    """The next lines, in order, are exactly ``expected`` (continuation lines have no prefix)."""
    line(run, expected[0])
    for text in expected[1:]:
        run.wait_for_line(re.compile("^" + re.escape(text) + "$"))


def test_the_phone_shows_progress_replacement_clear_and_rich_content(cli: Cli, caller: httpx.Client) -> None:
    run = cli.start("phone", "run")
    send(caller, message="stream check")
    line(run, "notification: stream check")

    first = send(caller, title="Deploy", message="1/3 building", sequence_id="deploy-42", tags=["hourglass"])
    assert first["sequence_id"] == "deploy-42"
    line(run, "notification (sequence deploy-42): ⌛ Deploy — 1/3 building")
    send(caller, title="Deploy", message="2/3 testing", sequence_id="deploy-42", tags=["hourglass"])
    line(run, "notification (replaces deploy-42): ⌛ Deploy — 2/3 testing")
    send(
        caller,
        title="Deploy",
        message="**done** in 3 min\n- 12 tests",
        sequence_id="deploy-42",
        markdown=True,
        tags=["white_check_mark", "prod"],
        url="https://ci.example/run/42",
        url_title="Run 42",
        icon="https://ci.example/icon.png",
        actions=[
            {"label": "Open run", "url": "https://ci.example/run/42"},
            {"action": "http", "label": "Roll back", "url": HOOK, "body": '{"to": 41}'},
            {"action": "http", "label": "Ping", "url": HOOK, "method": "GET"},
        ],
    )
    next_lines(
        run,
        [
            "notification (replaces deploy-42): ✅ Deploy — **done** in 3 min\\n- 12 tests (markdown)",
            "  tags: prod",
            "  link: Run 42 → https://ci.example/run/42",
            "  icon: https://ci.example/icon.png",
            "  [1] Open run → https://ci.example/run/42 (view)",
            f"  [2] Roll back → {HOOK} (http POST)",
            f"  [3] Ping → {HOOK} (http GET)",
        ],
    )
    cleared = caller.delete("/v1/notifications/deploy-42")
    assert cleared.status_code == 200, cleared.text
    line(run, "notification cleared: deploy-42")

    plain = send(caller, message="backup done", tags=["tada", "nightly"])
    next_lines(run, ["notification: 🎉 backup done", "  tags: nightly"])
    send(caller, message="backup checked", sequence_id=str(plain["id"]))  # the id is the sequence
    line(run, f"notification (replaces {plain['id']}): backup checked")
    stop(run)


def test_a_computer_shows_them_too_and_a_clear_goes_only_where_it_is_sent(
    cli: Cli, caller: httpx.Client
) -> None:
    pairing = cli.start("pair", "--name", "laptop", "--timeout", "60")
    ok(cli.run("phone", "pair", pairing.wait_for_line(CODE_LINE)[1]))
    ok(pairing.finish())
    tail = cli.start("tail")
    phone = cli.start("phone", "run", "--json")
    send(caller, message="job 1/2", sequence_id="job", tags=["warning"])
    line(tail, "notification (sequence job): ⚠️ job 1/2")
    assert caller.delete("/v1/notifications/job", params={"device": "laptop"}).status_code == 200
    line(tail, "notification cleared: job")
    send(caller, message="after the clear")
    line(tail, "notification: after the clear")
    phone.wait_for_line(re.compile(r"after the clear"))
    received = [json.loads(text) for text in phone.stdout_so_far().splitlines() if text.startswith("{")]
    assert [r["type"] for r in received] == ["notification", "notification"]  # no clear reached it
    assert received[0]["payload"]["sequence_id"].endswith(":job")  # qualified by its sender, a token
    stop(phone)
