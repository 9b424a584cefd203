"""``relaybox serve`` refusing a setting that cannot work, as an operator meets it: one line naming the
setting and exit status 1, never a traceback; with ``RELAYBOX_LOG_FORMAT=json`` that line and every
other the server prints, the warnings while it starts included, is one JSON object."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import CLI_TIMEOUT_S, RELAYBOX, TRACEBACK, RelayboxServer, child_environment

pytestmark = pytest.mark.e2e

POSTGRES = "postgresql://relaybox@127.0.0.1:9/never-reached"  # refused before anything connects
SERVER_KEY = "A" * 43 + "="


def serve(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RELAYBOX, "serve", "--port", "0", "--data-dir", str(tmp_path / "data")],
        env=child_environment(tmp_path / "home") | env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        cwd=tmp_path,
        check=False,
    )


def one_error_line(ran: subprocess.CompletedProcess[str]) -> str:
    assert ran.returncode == 1, (ran.stdout, ran.stderr)
    assert TRACEBACK not in ran.stderr + ran.stdout
    [line] = ran.stderr.splitlines()
    assert line.startswith("error: ")
    return line


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda folder: folder / "missing.json", "no such file"),
        (lambda folder: folder, "is a folder, not a file"),
        (lambda folder: _written(folder / "not-json.json", "{not json"), "not a Firebase service-account"),
    ],
    ids=["missing", "a-folder", "not-a-service-account"],
)
def test_an_unusable_fcm_credentials_file_is_one_line_naming_the_setting(
    tmp_path: Path, make: object, reason: str
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    line = one_error_line(serve(tmp_path, {"RELAYBOX_FCM_CREDENTIALS_FILE": str(path)}))
    assert line.startswith(f"error: RELAYBOX_FCM_CREDENTIALS_FILE={path}: {reason}")


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_postgres_without_a_server_key_is_refused_naming_the_setting(tmp_path: Path) -> None:
    line = one_error_line(serve(tmp_path, {"RELAYBOX_DATABASE_URL": POSTGRES}))
    assert line.startswith("error: RELAYBOX_SERVER_SECRET_KEY is required with PostgreSQL")
    assert "openssl rand -base64 32" in line


def test_postgres_with_the_embedded_object_store_is_refused_naming_the_setting(tmp_path: Path) -> None:
    env = {"RELAYBOX_DATABASE_URL": POSTGRES, "RELAYBOX_SERVER_SECRET_KEY": SERVER_KEY}
    line = one_error_line(serve(tmp_path, env))
    assert line.startswith("error: RELAYBOX_S3_BUCKET is required with PostgreSQL")
    assert "RELAYBOX_FILE_STORE_DIR" in line  # the other way out: a folder every replica shares


def test_a_malformed_server_key_is_one_line_too(tmp_path: Path) -> None:
    line = one_error_line(serve(tmp_path, {"RELAYBOX_SERVER_SECRET_KEY": "not-a-key"}))
    assert line == (
        "error: RELAYBOX_SERVER_SECRET_KEY must be base64 of 32 random bytes: openssl rand -base64 32"
    )


def test_a_setting_of_the_wrong_kind_is_one_line_naming_it_and_not_its_value(tmp_path: Path) -> None:
    line = one_error_line(serve(tmp_path, {"RELAYBOX_PUSH_TIMEOUT_S": "soon-ish"}))
    assert line.startswith("error: RELAYBOX_PUSH_TIMEOUT_S: ") and "soon-ish" not in line


def test_in_json_the_refusal_is_one_json_line_on_stdout(tmp_path: Path) -> None:
    ran = serve(tmp_path, {"RELAYBOX_DATABASE_URL": POSTGRES, "RELAYBOX_LOG_FORMAT": "json"})
    assert ran.returncode == 1 and ran.stderr == ""
    [line] = ran.stdout.splitlines()
    entry = json.loads(line)
    assert entry["level"] == "error" and entry["logger"] == "relaybox"
    assert entry["message"].startswith("RELAYBOX_SERVER_SECRET_KEY is required with PostgreSQL")


def test_in_json_every_line_of_a_start_is_json_the_key_warnings_included(tmp_path: Path) -> None:
    """A Redis URL without configured keys: the two warnings that every replica needs the same key,
    logged while the app is built (before uvicorn configures logging), come as JSON like the rest."""
    env = {
        "RELAYBOX_LOG_FORMAT": "json",
        "RELAYBOX_REDIS_URL": "redis://127.0.0.1:9/0",  # never reached while starting
    }
    with RelayboxServer(tmp_path / "server", env) as server:
        server.wait_until_ready()
        server.stop()
        stdout, stderr = server.stdout(), server.stderr()
    assert stderr == ""
    entries = [json.loads(line) for line in stdout.splitlines()]
    warnings = [entry["message"] for entry in entries if entry["level"] == "warning"]
    assert any(message.startswith("RELAYBOX_SERVER_SECRET_KEY is not set") for message in warnings)
    assert any(message.startswith("RELAYBOX_VAPID_PRIVATE_KEY is not set") for message in warnings)
    assert any(entry["message"].startswith("relaybox is listening on") for entry in entries)


def test_a_key_generated_into_the_data_folder_is_named_in_the_refusal(tmp_path: Path) -> None:
    """An upgrade of a server that ran alone with a generated key: the refusal says where it is."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "server.key").write_text(SERVER_KEY + "\n")
    line = one_error_line(serve(tmp_path, {"RELAYBOX_DATABASE_URL": POSTGRES}))
    assert str(tmp_path / "data" / "server.key") in line
