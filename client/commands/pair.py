"""``relaybox pair``: pair this computer with the phone, and the safety-number output both sides
show."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from client import computer
from client.commands.wiring import (
    Subcommands,
    add_server_option,
    add_state_option,
    command,
    positive_float,
    state_path,
)
from client.state import Paired
from core.domain.safety import format_safety_number

# relaybox pair


def add_pair_command(commands: Subcommands) -> None:
    pair = command(
        commands,
        "pair",
        summary="pair this computer with your phone (shows a code to type into the phone)",
        description="Pair this computer with your phone: generate a key pair, show a six-digit code,\n"
        "wait until the phone confirms it, then show the safety number. Compare it with the\n"
        "number on the phone; if they differ, a key was substituted and the pairing is unsafe.",
        run=_pair,
    )
    add_server_option(pair)
    pair.add_argument("--name", help="this computer's name as the phone lists it (default: the host name)")
    pair.add_argument(
        "--surface",
        choices=computer.SURFACES,
        default="cli",
        help="what kind of computer client this is (default: %(default)s)",
    )
    pair.add_argument(
        "--timeout",
        type=positive_float,
        default=computer.DEFAULT_TIMEOUT_S,
        metavar="S",
        help="give up after S seconds without a confirmation (default: %(default)g)",
    )
    pair.add_argument("--force", action="store_true", help="replace an already paired computer state file")
    add_state_option(pair, "computer")


def _pair(args: argparse.Namespace) -> int:
    path = state_path(args, "computer")
    name: str = args.name if args.name is not None else computer.default_name()
    state = computer.start_pairing(
        path, server=args.server, name=name, surface=args.surface, force=args.force
    )
    assert state.pending is not None
    code = state.pending.code
    expires = datetime.fromtimestamp(state.pending.expires_at, UTC).strftime("%H:%M:%S UTC")
    print(f"pairing code: {code}")
    print(f"type it into your phone: relaybox phone pair {code}")
    print(f"waiting for the phone to confirm (the code expires at {expires}) ...", flush=True)
    paired = computer.wait_for_pairing(path, timeout=args.timeout)
    print(f"paired with {peer_label(paired)}")
    print_safety_number(paired.safety_number, "phone")
    return 0


def peer_label(paired: Paired) -> str:
    return paired.peer.name or paired.peer_id


def print_safety_number(number: str, other: str) -> None:
    print(f"safety number: {format_safety_number(number)}")
    print(f"compare it with the number on the {other}; if they differ, do not trust this pairing", flush=True)
