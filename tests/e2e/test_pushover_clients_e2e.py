"""Acceptance: the Pushover client libraries people already use, unmodified, against a running
relaybox — only their base URL pointed at it, as docs/api.md says — and what each sent is checked
where it matters: on the virtual phone (``relaybox phone run``), text decrypted, image saved
byte for byte.

Each library hard-codes Pushover's address; the tests set that one constant (a module or class
attribute) and touch nothing else. chump also checks tokens against Pushover's 30-character shape
on the client side, so it gets a Pushover-shaped sender token (``POST /v1/tokens`` with
``"format": "pushover"``)."""

from __future__ import annotations

import io
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apprise
import chump
import pushover  # python-pushover2
import pytest
from apprise.plugins.pushover import NotifyPushover
from pushover_complete import PushoverAPI, pushover_api

from tests.e2e.conftest import BackgroundCli, Cli, CliResult

pytestmark = pytest.mark.e2e

LINE_TIMEOUT_S = 15.0
USER_KEY = "uQiRzpo4DXghDmr9QzzfQu27cmVRsG"  # Pushover's user key: accepted and ignored
IMAGE = b"\x89PNG\r\n\x1a\n" + os.urandom(20_000)


@dataclass
class Phone:
    run: BackgroundCli
    downloads: Path
    token: str


def ok(result: CliResult) -> CliResult:
    assert result.returncode == 0, result
    return result


@pytest.fixture
def phone(cli: Cli, tmp_path: Path) -> Iterator[Phone]:
    state = tmp_path / "phone.json"
    ok(cli.run("phone", "register", "--name", "Pixel", "--state", state))
    token = ok(cli.run("phone", "tokens", "create", "--label", "pushover", "--state", state)).stdout.strip()
    downloads = tmp_path / "phone-downloads"
    run = cli.start("phone", "run", "--json", "--downloads", downloads, "--state", state)
    yield Phone(run, downloads, token)
    run.process.terminate()
    run.finish()


def received(phone: Phone, message: str) -> dict[str, Any]:
    """The phone's record of the notification carrying ``message`` (others are skipped)."""
    deadline = time.monotonic() + LINE_TIMEOUT_S
    while True:
        line = phone.run.wait_for_line(re.compile(r"^\{.*\}$"), max(0.01, deadline - time.monotonic()))[0]
        record: dict[str, Any] = json.loads(line)
        if record.get("type") == "notification" and record["payload"]["message"] == message:
            return record


def saved_attachment(phone: Phone) -> Path:
    deadline = time.monotonic() + LINE_TIMEOUT_S
    while True:
        line = phone.run.wait_for_line(re.compile(r"^\{.*\}$"), max(0.01, deadline - time.monotonic()))[0]
        record: dict[str, Any] = json.loads(line)
        assert record.get("type") != "attachment_failed", record
        if record.get("type") == "attachment_saved":
            return Path(record["path"])


def test_apprise(cli: Cli, phone: Phone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(NotifyPushover, "notify_url", f"{cli.server_url}/v1/messages.json")
    # No target: Apprise sends device=ALL_DEVICES, which relaybox used to drop while saying status 1.
    everyone = NotifyPushover(user_key=USER_KEY, token=phone.token)
    assert everyone.notify(body="apprise to all devices", title="Apprise") is True
    assert received(phone, "apprise to all devices")["payload"]["title"] == "Apprise"

    picture = tmp_path / "camera.png"
    picture.write_bytes(IMAGE)
    attach = apprise.AppriseAttachment(str(picture))
    assert everyone.notify(body="apprise with a picture", attach=attach) is True
    saved = saved_attachment(phone)
    assert saved.read_bytes() == IMAGE and saved.parent == phone.downloads

    named = NotifyPushover(user_key=USER_KEY, token=phone.token, targets=["Pixel"])
    assert named.notify(body="apprise to the phone by name") is True
    received(phone, "apprise to the phone by name")
    unknown = NotifyPushover(user_key=USER_KEY, token=phone.token, targets=["fridge"])
    assert unknown.notify(body="apprise to nobody") is False  # status 0: Apprise reports the failure


def test_python_pushover2(cli: Cli, phone: Phone, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pushover, "MESSAGE_URL", f"{cli.server_url}/v1/messages.json")
    pushover.init(phone.token)
    client = pushover.Client(USER_KEY, config_path=os.devnull)
    client.send_message("python-pushover2 says hi", title="pp2", priority=1)
    record = received(phone, "python-pushover2 says hi")
    assert (record["payload"]["title"], record["payload"]["priority"]) == ("pp2", "high")
    client.send_message("python-pushover2 picture", attachment=io.BytesIO(IMAGE))
    assert saved_attachment(phone).read_bytes() == IMAGE
    with pytest.raises(pushover.RequestError):
        client.send_message("nobody", device="fridge")


def test_pushover_complete(cli: Cli, phone: Phone, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pushover_api, "PUSHOVER_API_URL", f"{cli.server_url}/v1/")
    api = PushoverAPI(phone.token)
    api.send_message(USER_KEY, "pushover-complete says hi", title="pc", url="https://example.org/")
    assert received(phone, "pushover-complete says hi")["payload"]["url"] == "https://example.org/"
    api.send_message(USER_KEY, "pushover-complete picture", image=io.BytesIO(IMAGE))
    assert saved_attachment(phone).read_bytes() == IMAGE
    assert sorted(api.get_sounds()) == ["none", "pushover"]
    with pytest.raises(pushover_api.BadAPIRequestError, match="no_matching_device"):
        api.send_message(USER_KEY, "nobody", device="fridge")


def test_chump(cli: Cli, phone: Phone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "phone.json"
    created = ok(
        cli.run("phone", "tokens", "create", "--label", "chump", "--format", "pushover", "--state", state)
    )
    token = created.stdout.strip()
    assert re.fullmatch(r"[A-Za-z0-9]{30}", token)  # the shape chump insists on
    monkeypatch.setattr(chump, "ENDPOINT", f"{cli.server_url}/v1/")
    app = chump.Application(token)
    assert app.is_authenticated
    user = app.get_user(USER_KEY)
    message = user.send_message("chump says hi", title="chump", priority=chump.HIGH)
    assert message.is_sent and message.id.startswith("msg_")
    assert received(phone, "chump says hi")["payload"]["priority"] == "high"
