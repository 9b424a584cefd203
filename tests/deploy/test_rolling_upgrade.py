"""Expand-then-contract, tested: during a rolling upgrade the previous release's replicas keep
serving on the schema the new release migrated to, next to the new release's, and a rollback runs on
it too. "The previous release" is the code just before the newest migration was added (git history);
both are real ``relaybox serve`` processes on one PostgreSQL database. A release that meets a schema
newer than its own migrations leaves it as it is instead of stopping (``core.store.schema_version``)."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from core.store import migrate
from core.store.database import make_engine
from tests.e2e.conftest import CLI_TIMEOUT_S, RELAYBOX, RelayboxServer, child_environment, free_port
from tests.reliability.traffic import make_account, post_envelope
from tests.services import fresh_postgres_database, missing, replica_env

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

REPO = Path(__file__).resolve().parents[2]
VERSIONS = REPO / "core" / "store" / "migrations" / "versions"
TREES = ["pyproject.toml", "core", "oauth", "connector", "app", "client", "webapp", "demo"]


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout


def newest_migration() -> Path:
    return max(VERSIONS.glob("[0-9]*.py"), key=lambda path: int(re.match(r"\d+", path.name)[0]))  # type: ignore[index]


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree of the commit before the one that added the newest migration. Along the first
    parents, with a merge compared to its first parent only, so a migration a branch brought in is
    added by its merge and the release before it is main before that merge."""
    relative = newest_migration().relative_to(REPO).as_posix()
    try:
        added = git(
            "log", "--first-parent", "-m", "--diff-filter=A", "--format=%H", "-1", "--", relative
        ).strip()
    except (OSError, subprocess.CalledProcessError) as error:
        missing(f"no git history here ({error})")
    if not added:
        missing(f"{relative} is not committed yet: commit it to test the release before it")
    tree = tmp_path_factory.mktemp("previous-release")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", f"{added}^", *TREES], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    assert not (tree / relative).exists()  # it predates the newest migration
    return tree


@pytest.fixture
def database() -> Iterator[str]:
    with fresh_postgres_database() as url:
        engine = make_engine(url)
        migrate.upgrade(engine)  # this release's schema, as its init container leaves it
        engine.dispose()
        yield url


def old_env(tree: Path, workdir: Path) -> dict[str, str]:
    """The previous release's code first on the path (before the virtualenv's editable install)."""
    return {"PYTHONPATH": os.pathsep.join([str(tree), child_environment(workdir)["PYTHONPATH"]])}


def test_the_previous_release_serves_on_the_new_schema_beside_the_new_release(
    previous_release: Path, database: str, tmp_path: Path
) -> None:
    shared = replica_env(tmp_path / "objects") | {
        "RELAYBOX_DATABASE_URL": database,
        "RELAYBOX_MIGRATE_ON_START": "false",  # as in Kubernetes: the init container migrated
        "RELAYBOX_LIMIT_IP_MINUTE": "10000",
        "RELAYBOX_LIMIT_IP_HOUR": "10000",
    }
    env = old_env(previous_release, tmp_path / "old")
    imported = subprocess.run(
        [sys.executable, "-c", "import core.bootstrap; print(core.bootstrap.__file__)"],
        env=child_environment(tmp_path / "old") | env,
        cwd=tmp_path,  # as the server runs: not in this checkout, whose folder Python would look in first
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(imported).is_relative_to(previous_release)  # the old code, not this checkout's
    with (
        RelayboxServer(tmp_path / "old", shared | env, port=free_port()) as old,
        RelayboxServer(tmp_path / "new", shared, port=free_port()) as new,
    ):
        old_url, new_url = old.wait_until_ready(), new.wait_until_ready()
        with (
            httpx.Client(base_url=old_url, timeout=10, trust_env=False) as old_http,
            httpx.Client(base_url=new_url, timeout=10, trust_env=False) as new_http,
        ):
            account = make_account(old_http)  # registered, paired and a token minted by the old code
            for http in (old_http, new_http):
                sent = http.post(
                    "/v1/send",
                    json={"message": f"rolling {secrets.token_hex(2)}"},
                    headers={"Authorization": f"Bearer {account.token}"},
                )
                assert sent.status_code == 200, sent.text
                assert post_envelope(http, account.computer, account.phone).status_code == 202
            assert old_http.get("/readyz").status_code == new_http.get("/readyz").status_code == 200


def test_a_release_meeting_a_newer_schema_runs_on_it_instead_of_stopping(
    database: str, tmp_path: Path
) -> None:
    """A rollback: the database carries a revision this release's migrations do not know."""
    engine = make_engine(database)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    env = child_environment(tmp_path) | {"RELAYBOX_DATABASE_URL": database}
    migrated = subprocess.run(
        [*RELAYBOX, "migrate"], env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False
    )
    assert migrated.returncode == 0, migrated.stderr
    assert "the database schema (9999) is newer than this release's migrations" in migrated.stdout
    server_env = replica_env(tmp_path / "objects") | {"RELAYBOX_DATABASE_URL": database}
    with RelayboxServer(tmp_path / "server", server_env) as server:  # migrates on start: it must not stop
        with httpx.Client(base_url=server.wait_until_ready(), timeout=10, trust_env=False) as http:
            assert http.get("/readyz").status_code == 200
        server.stop()
        assert "is newer than this release's migrations" in server.stderr()
