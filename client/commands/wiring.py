"""Building blocks for every client command: leaf commands and groups, the shared ``--state`` and
``--server`` options, argument types, and ``guarded``, which turns every ``ClientError`` into one
``error: code: message`` line on stderr and exit code 1."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeAlias

from client.api import ApiError
from client.state import ClientError, Role
from client.state_file import default_state_path

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Run: TypeAlias = Callable[[argparse.Namespace], int]

SERVER_ENV = "RELAYBOX_SERVER"
DEFAULT_SERVER = "http://127.0.0.1:8787"
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


def command(
    parent: Subcommands, name: str, *, summary: str, description: str, run: Run
) -> argparse.ArgumentParser:
    """Add a leaf command whose errors are reported as one line (see ``guarded``)."""
    parser = parent.add_parser(
        name, help=summary, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.set_defaults(run=guarded(run))
    return parser


def group(parent: Subcommands, name: str, *, summary: str, description: str) -> Subcommands:
    """Add a command group; running it without a subcommand is a usage error."""
    parser = parent.add_parser(
        name, help=summary, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    return parser.add_subparsers(dest=f"{name}_command", required=True, metavar="COMMAND")


def add_state_option(parser: argparse.ArgumentParser, role: Role) -> None:
    parser.add_argument(
        "--state",
        type=Path,
        metavar="PATH",
        help=f"the {role}'s state file (default: $RELAYBOX_CLIENT_STATE_DIR/{role}.json, "
        f"else ~/.config/relaybox/{role}.json)",
    )


def add_server_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server",
        metavar="URL",
        default=os.environ.get(SERVER_ENV) or DEFAULT_SERVER,
        help=f"base URL of the relaybox server (default: ${SERVER_ENV}, else {DEFAULT_SERVER})",
    )


def state_path(args: argparse.Namespace, role: Role) -> Path:
    given: Path | None = args.state
    return given.expanduser() if given is not None else default_state_path(role)


def guarded(run: Run) -> Run:
    """Report ``ClientError``, file-system errors and Ctrl-C as one line on stderr, never a traceback."""

    def guarded_run(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except ApiError as error:
            return fail(error.code, error.message + _describe_details(error.details))
        except ClientError as error:
            return fail(error.code, error.message)
        except OSError as error:
            where = f" ({error.filename})" if error.filename else ""
            return fail("os_error", f"{error.strerror or error}{where}")
        except KeyboardInterrupt:
            print(file=sys.stderr)  # end the line the terminal shows ^C on
            fail("interrupted", "stopped before finishing")
            return EXIT_INTERRUPTED

    return guarded_run


def fail(code: str, message: str) -> int:
    one_line = " ".join(message.split())
    print(f"error: {code}: {one_line}", file=sys.stderr)
    return EXIT_ERROR


def _describe_details(details: Mapping[str, Any]) -> str:
    """`` (name: too long)`` for validation errors, `` (max=50)`` for other details, else nothing."""
    parts: list[str] = []
    for key, value in details.items():
        if key == "errors" and isinstance(value, list):
            parts.extend(
                f"{item.get('field', '?')}: {item.get('problem', 'invalid')}"
                for item in value
                if isinstance(item, dict)
            )
        else:
            parts.append(f"{key}={json.dumps(value, separators=(',', ':'))}")
    return f" ({'; '.join(parts)})" if parts else ""


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value
