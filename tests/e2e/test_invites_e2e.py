"""Sign-up by invite with the real commands: a ``relaybox serve`` with ``RELAYBOX_REGISTRATION=invite``;
the first CLI phone claims it, a second is refused and told how to get an invite, registers with
one from ``relaybox phone invite``, and that invite does not work twice; the operator's
``relaybox invite``, run on the server's data folder, admits one more. Both print the web app's
invite link too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Cli, RelayboxServer

pytestmark = pytest.mark.e2e

ENV = {"RELAYBOX_REGISTRATION": "invite"}


@pytest.fixture
def relaybox_process(tmp_path: Path) -> Iterator[RelayboxServer]:
    with RelayboxServer(tmp_path / "server", env=ENV) as server:
        server.wait_until_ready()
        yield server


def register(cli: Cli, tmp_path: Path, name: str, *extra: str) -> tuple[int, str, str]:
    done = cli.run("phone", "register", "--name", name, "--state", tmp_path / f"{name}.json", *extra)
    return done.returncode, done.stdout, done.stderr


def test_the_first_phone_claims_and_the_next_ones_come_by_invite(
    cli: Cli, relaybox_process: RelayboxServer, tmp_path: Path
) -> None:
    assert register(cli, tmp_path, "first")[0] == 0

    status, _, refused = register(cli, tmp_path, "second")
    assert status == 1
    assert refused.startswith("error: registration_closed:")
    assert "relaybox phone invite" in refused and "--invite INVITE" in refused

    made = cli.run("phone", "invite", "--state", tmp_path / "first.json")
    assert made.returncode == 0, made.stderr
    invite = made.stdout.strip()
    assert invite.startswith("rbi_") and "--invite INVITE" in made.stderr
    assert f"or open in its browser: {relaybox_process.url}/app/#invite={invite}\n" in made.stderr
    status, out, err = register(cli, tmp_path, "second", "--invite", invite)
    assert status == 0, err
    assert "registered phone" in out

    status, _, reused = register(cli, tmp_path, "third", "--invite", invite)
    assert status == 1 and reused.startswith("error: invalid_invite:")

    cli.env.update(ENV)  # the operator runs it with the server's settings, on its data folder
    operator = cli.run("invite", "--data-dir", tmp_path / "server" / "data", timeout=60)
    assert operator.returncode == 0, operator.stderr
    assert "registration here is invite" in operator.stderr
    assert f"/app/#invite={operator.stdout.strip()}\n" in operator.stderr  # the web app's invite link
    assert register(cli, tmp_path, "third", "--invite", operator.stdout.strip())[0] == 0
