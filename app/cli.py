"""The ``relaybox`` command: ``serve``, ``migrate`` and ``invite`` here; the device-client commands
come from ``client.commands`` (``phone``, ``pair``, …).

Ctrl-C that no command handles itself ends any of them with one line and exit status 130, never a
traceback; so that this holds from the first moment, the heavy imports happen inside ``main``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.settings import Settings

INTERRUPTED = 130  # the exit status after Ctrl-C, as a shell reports a command SIGINT stopped


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("interrupted (Ctrl-C)", file=sys.stderr, flush=True)
        return INTERRUPTED


def _main(argv: Sequence[str] | None) -> int:
    from client.commands import add_commands as add_client_commands

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
        "--port", type=_port, help="listen port (RELAYBOX_PORT, default 8787; 0 = any free port)"
    )
    serve.add_argument("--data-dir", help="folder for the SQLite file and server key (RELAYBOX_DATA_DIR)")
    serve.set_defaults(run=_serve)

    migrate = commands.add_parser(
        "migrate",
        help="apply database migrations and exit",
        description="Bring the database named by the settings to the newest schema.",
    )
    migrate.set_defaults(run=_migrate)

    invite = commands.add_parser(
        "invite",
        help="make a single-use invite for one more phone (the operator, on the server's database)",
        description="Make an invite that lets one more phone register (POST /v1/devices with it as\n"
        "`invite`, or `relaybox phone register --invite INVITE`), for 24 hours, once. For a server\n"
        "whose registration is by invite (RELAYBOX_REGISTRATION=invite, the default off loopback)\n"
        "and whose phones are lost: a phone makes its own with `relaybox phone invite`. Run it\n"
        "where the server runs, with the server's settings (RELAYBOX_* variables): it writes to\n"
        "the server's database directly. Refused where registration is closed.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    invite.add_argument("--data-dir", help="the server's data folder (RELAYBOX_DATA_DIR)")
    invite.set_defaults(run=_invite)

    demo = commands.add_parser(
        "demo",
        help="watch it all work end to end: temporary server, virtual phone, MCP client",
        description="Start a server on a temporary SQLite file, register a virtual phone and start it, then\n"
        "connect an MCP client, as an AI assistant would, through the full OAuth flow: it opens\n"
        "the consent page, the virtual phone confirms the code shown there, and the page is\n"
        "allowed. The client then calls every tool (list_devices, send_notification,\n"
        "clear_notification, remind_me, request_approval, check_reply, find_my_phone, send_file,\n"
        "cancel_reminder) and each step shows what the phone did. Takes about 10 seconds.\n\n"
        "Nothing outside the temporary folder is used: no RELAYBOX_* settings, no .env file, no\n"
        "state of yours. Everything is stopped and the folder removed at the end, also after an\n"
        "error or Ctrl-C. Exit status: 0 when every step worked, 1 on an error, 130 on Ctrl-C.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument(
        "--keep", action="store_true", help="keep the temporary folder (server log, phone state, Downloads)"
    )
    demo.add_argument(
        "--timeout",
        type=_seconds,
        default=120.0,
        metavar="S",
        help="give up (exit status 1) when the whole demo takes longer than S seconds (default: %(default)g)",
    )
    demo.set_defaults(run=_demo)

    add_client_commands(commands)
    args = parser.parse_args(argv)
    result: int = args.run(args)
    return result


def _settings(args: argparse.Namespace) -> Settings:
    """The settings, with the command line's overrides; a value they refuse ends the command with
    one line per setting naming it (never its value: it may be a secret), exit status 1."""
    from pydantic import ValidationError

    from core.settings import Settings

    overrides = {
        key: value
        for key, value in (
            ("host", getattr(args, "host", None)),
            ("port", getattr(args, "port", None)),
            ("data_dir", getattr(args, "data_dir", None)),
        )
        if value is not None
    }
    try:
        return Settings(**overrides)
    except ValidationError as error:
        prefix = str(Settings.model_config.get("env_prefix", ""))
        for problem in error.errors(include_input=False, include_url=False):
            name = prefix + str(problem["loc"][0]).upper() if problem["loc"] else "settings"
            print(f"error: {name}: {problem['msg']}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


def _serve(args: argparse.Namespace) -> int:
    from app.serve import serve

    return serve(_settings(args))


def _invite(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from core.bootstrap import build_core
    from core.errors import RelayError
    from core.principal import Principal
    from core.services.signup import operator_invite

    settings = _settings(args)
    core = build_core(settings)
    try:
        made = core.run_sync(operator_invite, Principal.system())
    except RelayError as error:
        print(f"error: {error.code}: {error.message}", file=sys.stderr)
        return 1
    finally:
        core.engine.dispose()
    until = datetime.fromtimestamp(made.expires_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(made.invite)
    print(
        f"single use, until {until}; registration here is {settings.effective_registration}", file=sys.stderr
    )
    print(
        f"on the new phone: relaybox phone register --server {settings.base_url} --invite INVITE",
        file=sys.stderr,
    )
    link = f"{settings.base_url.rstrip('/')}/app/#invite={made.invite}"
    print(f"or open in its browser: {link}", file=sys.stderr)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from demo.run import run_demo

    return run_demo(keep=args.keep, timeout=args.timeout)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value


def _port(text: str) -> int:
    if not (text.isascii() and text.isdigit() and int(text) <= 65535):
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 to 65535)")
    return int(text)


def _migrate(args: argparse.Namespace) -> int:
    from core.bootstrap import NEWER_SCHEMA
    from core.store.database import make_engine
    from core.store.schema_version import upgrade_unless_newer

    settings = _settings(args)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    if settings.log_format == "json":  # an init container's lines, like the server's
        from app.logs import configure_logging

        configure_logging(settings.log_format, settings.log_level)
    newer = upgrade_unless_newer(make_engine(settings.effective_database_url))
    message = NEWER_SCHEMA % newer if newer else "database is at the newest schema"
    if settings.log_format == "json":
        logging.getLogger("relaybox").log(logging.WARNING if newer else logging.INFO, message)
    else:
        print(message)
    return 0


if __name__ == "__main__":
    sys.exit(main())
