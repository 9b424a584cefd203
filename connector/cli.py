"""The ``relaybox`` command: ``serve`` and ``migrate`` here; the device-client commands come from
``client.cli`` (``phone``, ``pair``, …)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from client import cli as client_cli
from core.settings import Settings


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="relaybox",
        description="relaybox: reach your own phone from scripts and AI assistants.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="run the server (SQLite + in-process adapters by default)",
        description="Run the relaybox server. Settings come from RELAYBOX_* variables.",
    )
    serve.add_argument("--host", help="listen address (RELAYBOX_HOST, default 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, help="listen port (RELAYBOX_PORT, default 8787; 0 = any free port)"
    )
    serve.add_argument("--data-dir", help="folder for the SQLite file and server key (RELAYBOX_DATA_DIR)")
    serve.set_defaults(run=_serve)

    migrate = commands.add_parser(
        "migrate",
        help="apply database migrations and exit",
        description="Bring the database named by the settings to the newest schema.",
    )
    migrate.set_defaults(run=_migrate)

    client_cli.add_commands(commands)
    args = parser.parse_args(argv)
    result: int = args.run(args)
    return result


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {
        key: value
        for key, value in (
            ("host", getattr(args, "host", None)),
            ("port", getattr(args, "port", None)),
            ("data_dir", getattr(args, "data_dir", None)),
        )
        if value is not None
    }
    return Settings(**overrides)


def _serve(args: argparse.Namespace) -> int:
    from connector.serve import serve

    return serve(_settings(args))


def _migrate(args: argparse.Namespace) -> int:
    from core.store import migrate
    from core.store.database import make_engine

    settings = _settings(args)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    migrate.upgrade(make_engine(settings.effective_database_url))
    print("database is at the newest schema")
    return 0


if __name__ == "__main__":
    sys.exit(main())
