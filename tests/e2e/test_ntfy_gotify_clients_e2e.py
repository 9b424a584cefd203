"""Acceptance: the clients people already use for ntfy, Gotify and Pushover, unmodified, against a
running relaybox (``relaybox serve``, real HTTP over a socket), and what each sent checked on the
virtual phone (``relaybox phone run``): text decrypted, files saved byte for byte.

- Apprise's ``ntfy://`` with token auth (its JSON publish) and Basic auth, and with a file (its
  attachment upload); ``gotify://``; ``pover://`` with priority 2, acknowledged on the phone, after
  which Pushover's receipt route says so.
- The ``gotify`` package from PyPI (it speaks httpx to the server; nothing leaves the machine).
- ntfy's documented ``curl`` examples, run with the real ``curl``: headers, query parameters, JSON,
  attachments, and delay (scheduled: ``test_scheduled_e2e.py`` sees it arrive at its time).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import apprise
import gotify
import httpx
import pytest
from apprise.plugins.gotify import NotifyGotify
from apprise.plugins.ntfy import NotifyNtfy
from apprise.plugins.pushover import NotifyPushover

from tests.e2e.conftest import Cli
from tests.e2e.test_pushover_clients_e2e import USER_KEY, Phone, ok, received
from tests.services import missing

pytestmark = pytest.mark.e2e

LINE_TIMEOUT_S = 15.0
PLUGINS: dict[str, Any] = {"ntfy": NotifyNtfy, "gotify": NotifyGotify, "pover": NotifyPushover}
FILE = b"\x89PNG\r\n\x1a\n" + os.urandom(30_000)


@pytest.fixture
def phone(cli: Cli, tmp_path: Path) -> Iterator[Phone]:
    state = tmp_path / "phone.json"
    ok(cli.run("phone", "register", "--name", "Pixel", "--state", state))
    token = ok(cli.run("phone", "tokens", "create", "--label", "monitoring", "--state", state)).stdout.strip()
    downloads = tmp_path / "phone-downloads"
    run = cli.start("phone", "run", "--json", "--downloads", downloads, "--state", state)
    yield Phone(run, downloads, token)
    run.process.terminate()
    run.finish()


def host(cli: Cli) -> str:
    return str(urlsplit(cli.server_url).netloc)


def notify(url: str, **message: Any) -> bool:
    """Apprise's own reading of ``url`` (its plugin's ``parse_url``, as ``Apprise.add`` does), then
    its ``notify``; the plugin is chosen by scheme, without loading every plugin Apprise has (its
    e-mail plugin imports a module that warns on this Python)."""
    plugin = PLUGINS[url.split("://", 1)[0]]
    parsed = plugin.parse_url(url)
    assert parsed, url
    return bool(plugin(**parsed).notify(**message))


def received_with_file(phone: Phone, message: str) -> tuple[dict[str, Any], Path]:
    """The notification carrying ``message`` and the file the phone saved beside it (the phone
    prints the two in either order)."""
    deadline = time.monotonic() + LINE_TIMEOUT_S
    payload: dict[str, Any] | None = None
    saved: Path | None = None
    while payload is None or saved is None:
        line = phone.run.wait_for_line(re.compile(r"^\{.*\}$"), max(0.01, deadline - time.monotonic()))[0]
        record: dict[str, Any] = json.loads(line)
        assert record.get("type") != "attachment_failed", record
        if record.get("type") == "notification" and record["payload"]["message"] == message:
            payload = record["payload"]
        elif record.get("type") == "attachment_saved":
            saved = Path(record["path"])
    return payload, saved


def next_record(phone: Phone, kind: str) -> dict[str, Any]:
    deadline = time.monotonic() + LINE_TIMEOUT_S
    while True:
        line = phone.run.wait_for_line(re.compile(r"^\{.*\}$"), max(0.01, deadline - time.monotonic()))[0]
        record: dict[str, Any] = json.loads(line)
        if record.get("type") == kind:
            return record


def test_apprise_ntfy_with_a_token_publishes_as_json(cli: Cli, phone: Phone) -> None:
    url = f"ntfy://{host(cli)}/backups?token={phone.token}&priority=high&tags=floppy_disk,ok&format=markdown"
    assert notify(url, body="Backup **done**", title="nightly") is True
    payload = received(phone, "Backup **done**")["payload"]
    assert (payload["title"], payload["priority"], payload["tags"]) == (
        "nightly",
        "high",
        ["floppy_disk", "ok"],
    )
    assert payload["markdown"] is True
    assert notify(f"ntfy://{host(cli)}/backups?token={phone.token}", body="no title") is True
    assert received(phone, "no title")["payload"]["title"] == "backups"  # the topic names it


def test_apprise_ntfy_with_basic_auth_and_a_file(cli: Cli, phone: Phone, tmp_path: Path) -> None:
    picture = tmp_path / "camera.png"
    picture.write_bytes(FILE)
    url = f"ntfy://anyone:{phone.token}@{host(cli)}/cameras"
    assert notify(url, body="motion at the door", attach=apprise.AppriseAttachment(str(picture))) is True
    payload, saved = received_with_file(phone, "motion at the door")
    assert (payload["attachment"]["name"], payload["attachment"]["type"]) == ("camera.png", "image/png")
    assert saved.read_bytes() == FILE and saved.name == "camera.png"
    assert notify(f"ntfy://anyone:rfk_live_{'x' * 32}@{host(cli)}/cameras", body="stranger") is False


def test_apprise_gotify(cli: Cli, phone: Phone) -> None:
    url = f"gotify://{host(cli)}/{phone.token}?priority=high&format=markdown"
    assert notify(url, body="Disk *almost* full", title="db-1") is True
    payload = received(phone, "Disk *almost* full")["payload"]
    assert (payload["title"], payload["priority"], payload["markdown"]) == ("db-1", "high", True)
    assert notify(f"gotify://{host(cli)}/not-a-token", body="refused") is False


def test_the_gotify_package_from_pypi(cli: Cli, phone: Phone) -> None:
    client = gotify.Gotify(base_url=cli.server_url, app_token=phone.token)
    extras = {"client::notification": {"click": {"url": "https://grafana.example/d/1"}}}
    sent = client.create_message("CPU at 97%", title="grafana", priority=9, extras=extras)
    assert isinstance(sent["id"], int) and sent["title"] == "grafana" and sent["priority"] == 9
    payload = received(phone, "CPU at 97%")["payload"]
    assert (payload["priority"], payload["url"]) == ("high", "https://grafana.example/d/1")
    with pytest.raises(gotify.GotifyError):
        gotify.Gotify(base_url=cli.server_url, app_token="AbCdEf").create_message("refused")


def test_apprise_pover_priority_2_is_acknowledged_on_the_phone(
    cli: Cli, phone: Phone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(NotifyPushover, "notify_url", f"{cli.server_url}/v1/messages.json")
    url = f"pover://{USER_KEY}@{phone.token}?priority=emergency&interval=30&expire=600"
    assert notify(url, body="prod is down", title="PagerDuty") is True
    alert = next_record(phone, "urgent")
    receipt = alert["receipt"]
    assert (alert["message"], alert["repeat_s"]) == ("prod is down", 30)
    receipts = f"{cli.server_url}/v1/receipts/{receipt}.json"
    assert httpx.get(receipts, params={"token": phone.token}).json()["acknowledged"] == 0
    state = tmp_path / "phone.json"
    acked = ok(cli.run("phone", "ack", receipt, "--state", state))
    assert acked.stdout == f"acknowledged {receipt} (acknowledged)\n"
    shown = httpx.get(receipts, params={"token": phone.token}).json()
    assert (shown["status"], shown["acknowledged"], shown["acknowledged_by_device"]) == (1, 1, "Pixel")


def curl(cli: Cli, *args: str) -> dict[str, Any]:
    """Run the real curl against the server; its JSON answer (with the HTTP status)."""
    if shutil.which("curl") is None:
        missing("curl is not installed on this machine")
    done = subprocess.run(
        ["curl", "-sS", "-w", "\n%{http_code}", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    body, _, status = done.stdout.rpartition("\n")
    answer: dict[str, Any] = json.loads(body)
    answer["_status"] = int(status)
    return answer


def test_ntfys_documented_curl_examples(cli: Cli, phone: Phone, tmp_path: Path) -> None:
    base, auth = cli.server_url, ["-H", f"Authorization: Bearer {phone.token}"]
    curl(cli, *auth, "-d", "Backup successful 😀", f"{base}/mytopic")
    assert received(phone, "Backup successful 😀")["payload"]["title"] == "mytopic"

    alert = [
        "-H",
        "Title: Unauthorized access detected",
        "-H",
        "Priority: urgent",
        "-H",
        "Tags: warning,skull",
    ]
    text = "Remote access to phils-laptop detected. Act right away."
    curl(cli, "-u", f":{phone.token}", *alert, "-d", text, f"{base}/phil_alerts")
    payload = received(phone, text)["payload"]
    assert (payload["title"], payload["priority"], payload["tags"]) == (
        "Unauthorized access detected",
        "urgent",
        ["warning", "skull"],
    )

    actions = (
        "view, Open portal, https://home.nest.com/, clear=true; "
        "http, Turn down, https://api.nest.com/, body='{\"temp\": 65}'"
    )
    curl(
        cli,
        *auth,
        "-d",
        "You left the house. Turn down the A/C?",
        "-H",
        f"Actions: {actions}",
        f"{base}/myhome",
    )
    buttons = received(phone, "You left the house. Turn down the A/C?")["payload"]["actions"]
    assert [b["label"] for b in buttons] == ["Open portal", "Turn down"]

    auth_query = base64.urlsafe_b64encode(f"Bearer {phone.token}".encode()).decode().rstrip("=")
    published = curl(
        cli,
        f"{base}/mywebhook/publish?message=Webhook+triggered&priority=high&tags=warning,skull&auth={auth_query}",
    )
    assert published["_status"] == 200 and published["event"] == "message"
    assert received(phone, "Webhook triggered")["payload"]["priority"] == "high"

    flower = tmp_path / "flower.jpg"
    flower.write_bytes(b"\xff\xd8\xff\xe0" + os.urandom(5000))
    curl(cli, *auth, "-T", str(flower), "-H", "Filename: flower.jpg", f"{base}/flowers")
    payload, saved = received_with_file(phone, "You received a file: flower.jpg")
    assert saved.read_bytes() == flower.read_bytes() and payload["attachment"]["type"] == "image/jpeg"
    curl(cli, *auth, "-X", "POST", "-H", "Attach: https://f-droid.org/F-Droid.apk", f"{base}/mydownloads")
    linked = next_record(phone, "notification")["payload"]
    assert linked["actions"] == [
        {"action": "view", "label": "F-Droid.apk", "url": "https://f-droid.org/F-Droid.apk"}
    ]

    document = {
        "topic": "mytopic",
        "message": "Disk space is low at 5.1 GB",
        "title": "Low disk space alert",
        "tags": ["warning", "cd"],
        "priority": 4,
        "click": "https://homecamera.lan/xasds1h2xsSsa/",
    }
    curl(cli, *auth, base, "-d", json.dumps(document))
    assert (
        received(phone, "Disk space is low at 5.1 GB")["payload"]["url"]
        == "https://homecamera.lan/xasds1h2xsSsa/"
    )

    asked_at = int(time.time())
    later = curl(cli, *auth, "-H", "In: 30min", "-d", "in half an hour", f"{base}/reminders")
    assert later["_status"] == 200 and later["relaybox"]["scheduled"] is True, later
    assert asked_at + 1800 <= later["time"] <= int(time.time()) + 1800  # ntfy's time: when it goes
    natural = curl(cli, *auth, "-H", "At: tomorrow, 10am", "-d", "Good morning", f"{base}/hello")
    assert (natural["_status"], natural["relaybox"]["code"]) == (400, "invalid_delay")
    email = curl(cli, *auth, "-H", "Email: phil@example.com", "-d", "mail me", f"{base}/alerts")
    assert (email["_status"], email["relaybox"]["code"]) == (400, "ntfy_feature_unsupported")
