"""Acceptance: a script's sends reach exactly the chosen devices of a real server, decrypted there.

A real ``relaybox serve``, a virtual phone and a computer paired through the CLI, and a sender
token from ``relaybox phone tokens create``. Four sends as scripts make them, with the real
``curl`` when it is installed (else httpx with the same bodies):

- ``POST /v1/send`` with a text/plain body (with httpx: no Content-Type at all);
- ``POST /v1/send`` form-encoded, ``device=desktop``: the computer only;
- ``POST /v1/messages.json`` (the Pushover shim) as multipart, the token in the body;
- ``POST /v1/send/{token}`` (the capability-URL alias) with a JSON body.

Then ``relaybox phone run --json`` (live, in the background) and ``relaybox tail --once --json``
(the computer; then the phone's state) must show each notification decrypted, with its title
and message intact, on exactly its devices; and the server's stdout (the access log) and stderr
must never contain the token.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import BackgroundCli, Cli, CliResult, RelayboxServer
from tests.e2e.test_relay_e2e import Devices, ok, paired_devices

pytestmark = pytest.mark.e2e

CURL = shutil.which("curl")
ANY_LINE = re.compile(r"^.+$")
LINE_TIMEOUT_S = 15.0
REQUEST_TIMEOUT_S = 15.0
LOG_TIMEOUT_S = 5.0
REDACTED_ALIAS = "POST /v1/send/[redacted] HTTP/1.1"


@dataclass(frozen=True)
class Reply:
    status: int
    body: dict[str, Any]


@dataclass(frozen=True)
class Expected:
    """One send as the devices must see it: the message id, its title (None: no title) and text."""

    what: str
    msg_id: str
    title: str | None
    message: str


def run_curl(*args: str, stdin: str | None = None) -> Reply:
    """The real ``curl`` (no proxy, bounded): its status code and JSON body."""
    assert CURL is not None
    argv = [CURL, "--silent", "--show-error", "--noproxy", "*", "--max-time", str(REQUEST_TIMEOUT_S)]
    argv += ["--write-out", "\n%{http_code}", *args]
    done = subprocess.run(
        argv,
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=REQUEST_TIMEOUT_S + 5,
        check=False,
    )
    assert done.returncode == 0, f"curl exited with {done.returncode}: {done.stderr}"
    body, _, status = done.stdout.rpartition("\n")
    decoded: dict[str, Any] = json.loads(body)
    return Reply(int(status), decoded)


def run_httpx(send: Callable[[httpx.Client], httpx.Response]) -> Reply:
    with httpx.Client(timeout=REQUEST_TIMEOUT_S, trust_env=False) as http:
        response = send(http)
    decoded: dict[str, Any] = response.json()
    return Reply(response.status_code, decoded)


def multipart(fields: dict[str, str]) -> tuple[bytes, str]:
    """A multipart/form-data body of plain fields (what ``curl -F`` sends) and its Content-Type."""
    boundary = f"relaybox-{uuid.uuid4().hex}"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        for name, value in fields.items()
    ]
    body = ("".join(parts) + f"--{boundary}--\r\n").encode()
    return body, f"multipart/form-data; boundary={boundary}"


def send_plain_text(url: str, token: str, message: str) -> Reply:
    """``curl --data-binary @- -H 'Content-Type: text/plain'``: the whole body is the message.
    (Plain ``curl -d`` would send it form-encoded.) Without curl: no Content-Type at all."""
    auth = f"Authorization: Bearer {token}"
    if CURL:
        return run_curl(
            "--data-binary",
            "@-",
            "-H",
            "Content-Type: text/plain",
            "-H",
            auth,
            f"{url}/v1/send",
            stdin=message,
        )
    return run_httpx(
        lambda http: http.post(
            f"{url}/v1/send", content=message.encode(), headers={"Authorization": f"Bearer {token}"}
        )
    )


def send_form(url: str, token: str, fields: dict[str, str]) -> Reply:
    """``curl -d name=value ...``: application/x-www-form-urlencoded, the values as typed (so
    without ``&``, ``+`` or ``%``, which ``-d`` does not encode)."""
    if CURL:
        pairs = [arg for name, value in fields.items() for arg in ("-d", f"{name}={value}")]
        return run_curl(*pairs, "-H", f"Authorization: Bearer {token}", f"{url}/v1/send")
    return run_httpx(
        lambda http: http.post(f"{url}/v1/send", data=fields, headers={"Authorization": f"Bearer {token}"})
    )


def send_pushover(url: str, fields: dict[str, str]) -> Reply:
    """``curl -F name=value ...`` to the Pushover shim: multipart, the token among the fields."""
    if CURL:
        pairs = [arg for name, value in fields.items() for arg in ("-F", f"{name}={value}")]
        return run_curl(*pairs, f"{url}/v1/messages.json")
    body, content_type = multipart(fields)
    return run_httpx(
        lambda http: http.post(
            f"{url}/v1/messages.json", content=body, headers={"Content-Type": content_type}
        )
    )


def send_alias_json(url: str, token: str, fields: dict[str, str]) -> Reply:
    """``POST /v1/send/TOKEN`` with a JSON body: the token in the path, no Authorization header."""
    if CURL:
        document = json.dumps(fields, ensure_ascii=False)
        return run_curl(
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            "@-",
            f"{url}/v1/send/{token}",
            stdin=document,
        )
    return run_httpx(lambda http: http.post(f"{url}/v1/send/{token}", json=fields))


def delivered_ids(reply: Reply) -> set[str]:
    assert reply.status == 200, reply
    assert reply.body["warnings"] == [], reply
    assert re.fullmatch(r"msg_[0-9a-f]{32}", reply.body["id"]), reply
    return {entry["device_id"] for entry in reply.body["delivered_to"]}


def notifications(records: list[dict[str, Any]]) -> list[Expected]:
    """The notifications among stream records, as (id, title, message), each checked for shape:
    an envelope from the server, opened with the device's key."""
    seen: list[Expected] = []
    for record in records:
        if record["type"] != "notification":
            continue
        assert (record["event"], record["from"]) == ("envelope", "server"), record
        payload = record["payload"]
        assert payload["type"] == "notification" and payload["priority"] == "default", record
        seen.append(Expected("", payload["id"], payload.get("title"), payload["message"]))
    return seen


def json_records(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def read_notifications(run: BackgroundCli, count: int) -> list[dict[str, Any]]:
    """Lines from a running follower until ``count`` notifications came out (others are kept too)."""
    records: list[dict[str, Any]] = []
    while sum(r["type"] == "notification" for r in records) < count:
        records.append(json.loads(run.wait_for_line(ANY_LINE, LINE_TIMEOUT_S)[0]))
    return records


def stop(background: BackgroundCli) -> CliResult:
    """SIGTERM: the follower saves its place and exits 0."""
    assert background.process.poll() is None, background.close()
    background.process.terminate()
    return ok(background.finish())


def wait_for_log(server: RelayboxServer, needle: str) -> str:
    """The server's stdout once it holds ``needle`` (uvicorn logs a request after answering it)."""
    deadline = time.monotonic() + LOG_TIMEOUT_S
    while needle not in (log := server.stdout()):
        if time.monotonic() > deadline:
            pytest.fail(f"no {needle!r} in the server's access log within {LOG_TIMEOUT_S} s:\n{log}")
        time.sleep(0.05)
    return log


def create_token(cli: Cli, devices: Devices) -> str:
    created = ok(cli.run("phone", "tokens", "create", "--label", "scripts", "--state", devices.phone))
    token = created.stdout.strip()
    assert re.fullmatch(r"rfk_live_[A-Za-z0-9]{32}", token), created
    return token


def test_curl_form_pushover_and_alias_sends_reach_exactly_the_chosen_devices(
    cli: Cli, relaybox_process: RelayboxServer, tmp_path: Path
) -> None:
    url = relaybox_process.url
    devices = paired_devices(cli, tmp_path)
    both = {devices.phone_id, devices.computer_id}
    token = create_token(cli, devices)
    phone_run = cli.start("phone", "run", "--json", "--state", devices.phone)

    plain = send_plain_text(url, token, "disk almost full")
    assert delivered_ids(plain) == both
    plain_sent = Expected("text/plain", plain.body["id"], None, "disk almost full")

    form_fields = {
        "message": "backup finished on build-01 (41 GB)",
        "title": "Nightly backup",
        "device": "desktop",
    }
    form = send_form(url, token, form_fields)
    assert delivered_ids(form) == {devices.computer_id}
    assert form.body["delivered_to"] == [{"device_id": devices.computer_id, "type": "cli"}]
    form_sent = Expected("form, desktop", form.body["id"], "Nightly backup", form_fields["message"])

    shim_fields = {
        "token": token,
        "user": "u" * 30,  # Pushover's user key: required by its clients, ignored here
        "message": "CPU at 97% on build-01 for 10 min",
        "title": "Load high ⚠ build-01",
    }
    shim = send_pushover(url, shim_fields)
    assert shim.status == 200 and shim.body["status"] == 1, shim
    assert re.fullmatch(r"msg_[0-9a-f]{32}", shim.body["request"]), shim
    shim_sent = Expected(
        "pushover multipart", shim.body["request"], shim_fields["title"], shim_fields["message"]
    )

    alias_fields = {"message": "deploy of v2.3 done — all checks green", "title": "Déploiement"}
    alias = send_alias_json(url, token, alias_fields)
    assert delivered_ids(alias) == both
    alias_sent = Expected("alias JSON", alias.body["id"], alias_fields["title"], alias_fields["message"])

    def keyed(items: list[Expected]) -> list[tuple[str, str | None, str]]:
        return [(item.msg_id, item.title, item.message) for item in items]

    phone_expected = keyed([plain_sent, shim_sent, alias_sent])
    computer_expected = keyed([plain_sent, form_sent, shim_sent, alias_sent])

    # The phone, live: the three for it in order, and (form came between them) nothing else.
    live = read_notifications(phone_run, 3)
    assert keyed(notifications(live)) == phone_expected

    # The computer drains its queue: all four, each opened with its own key.
    computer = ok(cli.run("tail", "--once", "--json", "--idle", "2", "--state", devices.computer))
    computer_records = json_records(computer.stdout)
    assert keyed(notifications(computer_records)) == computer_expected
    assert "warning" not in computer.stderr  # nothing dropped (undecryptable)

    stopped = stop(phone_run)
    assert keyed(notifications(json_records(stopped.stdout))) == phone_expected  # nothing more came
    assert "warning" not in stopped.stderr

    # The phone's queue read again from the start with `tail` on the phone's state: the same three.
    replay = ok(cli.run("tail", "--once", "--json", "--since", "0", "--state", devices.phone))
    assert keyed(notifications(json_records(replay.stdout))) == phone_expected
    assert "warning" not in replay.stderr

    # The token never reached the server's output; the alias was logged with its path redacted.
    access_log = wait_for_log(relaybox_process, REDACTED_ALIAS)
    assert access_log.count('"POST /v1/send HTTP/1.1" 200') == 2
    assert '"POST /v1/messages.json HTTP/1.1" 200' in access_log
    secrets = [token, *(json.loads(p.read_text())["device_token"] for p in (devices.phone, devices.computer))]
    for secret in secrets:
        assert secret not in access_log
        assert secret not in relaybox_process.stderr()
    assert token[len("rfk_live_") :] not in access_log  # not even its random part
