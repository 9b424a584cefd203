"""``relaybox phone``: the virtual phone's group and its own commands (register, pair, show,
connect, answer, ack)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from client import phone
from client.commands.pair import peer_label, print_safety_number
from client.commands.tokens import add_token_commands
from client.commands.wiring import (
    Subcommands,
    add_server_option,
    add_state_option,
    command,
    group,
    non_negative_int,
    state_path,
)
from client.state import ClientError, DeviceState
from core.domain.safety import format_safety_number

# relaybox phone …


def add_phone_commands(commands: Subcommands) -> Subcommands:
    """``relaybox phone``: the virtual phone. Returns the group so later commands can join it."""
    phone_commands = group(
        commands,
        "phone",
        summary="act as a (virtual) phone: register, confirm pairing codes, manage sender tokens",
        description="The virtual phone: a stand-in for the relaybox phone app, keeping its keys and\n"
        "device credential in a 0600 state file. Start with `relaybox phone register`.",
    )

    register = command(
        phone_commands,
        "register",
        summary="register a new phone with the server (creates an account)",
        description="Generate an X25519 key pair, register this phone with the server (which creates\n"
        "a new account whose root device it is) and save the state file.",
        run=_phone_register,
    )
    add_server_option(register)
    register.add_argument(
        "--name", default=phone.DEFAULT_NAME, help="the phone's name (default: %(default)s)"
    )
    register.add_argument(
        "--app-build", type=non_negative_int, metavar="N", help="app build number to report"
    )
    register.add_argument(
        "--invite",
        metavar="INVITE",
        help="an invite, which a server that takes new phones by invite needs: made by a phone already "
        "there (`relaybox phone invite`) or by its operator (`relaybox invite`)",
    )
    register.add_argument("--force", action="store_true", help="replace an existing phone state file")
    add_state_option(register, "phone")

    invite = command(
        phone_commands,
        "invite",
        summary="make a single-use invite for one more phone on this server (24 hours)",
        description="Make an invite that lets one more phone register on this phone's server, once,\n"
        "within 24 hours: a server reached from the internet takes new phones only by invite\n"
        "(RELAYBOX_REGISTRATION=invite). The invite is printed alone on stdout; give it to the\n"
        "new phone: `relaybox phone register --invite INVITE`, or the web app's set-up.",
        run=_phone_invite,
    )
    add_state_option(invite, "phone")

    pair = command(
        phone_commands,
        "pair",
        summary="confirm a pairing code shown by a computer",
        description="Confirm the six-digit code that `relaybox pair` (or another computer) shows,\n"
        "remember that computer, and print the safety number to compare with its screen.",
        run=_phone_pair,
    )
    pair.add_argument("code", metavar="CODE", help="the six-digit pairing code")
    add_state_option(pair, "phone")

    show = command(
        phone_commands,
        "show",
        summary="show this phone's id, name and paired devices",
        description="Show the phone's device id, name, server and paired devices with their safety\n"
        "numbers. Never shows the device credential or the secret key.",
        run=_phone_show,
    )
    add_state_option(show, "phone")

    add_token_commands(phone_commands)
    return phone_commands


def _phone_register(args: argparse.Namespace) -> int:
    path = state_path(args, "phone")
    state = phone.register(
        path,
        server=args.server,
        name=args.name,
        app_build=args.app_build,
        invite=args.invite,
        force=args.force,
    )
    print(f"registered phone {state.device_id} ({state.name or 'unnamed'}) on {state.server}")
    print(f"state saved to {path}")
    print(
        f"next: on the computer run `relaybox pair --server {state.server}`, then `relaybox phone pair CODE`"
    )
    return 0


def _phone_invite(args: argparse.Namespace) -> int:
    path = state_path(args, "phone")
    made = phone.create_invite(path)
    until = datetime.fromtimestamp(made.expires_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(made.invite)
    print(f"single use, until {until}", file=sys.stderr)
    server = phone.load(path).server
    print(f"on the new phone: relaybox phone register --server {server} --invite INVITE", file=sys.stderr)
    print(f"or open in its browser: {server.rstrip('/')}/app/#invite={made.invite}", file=sys.stderr)
    return 0


def _phone_pair(args: argparse.Namespace) -> int:
    paired = phone.confirm_pairing(state_path(args, "phone"), args.code)
    print(f"paired with {peer_label(paired)} ({paired.peer.surface_kind})")
    if paired.intent != "pair":
        print(f"code intent: {paired.intent}")
    print_safety_number(paired.safety_number, "computer")
    return 0


def _phone_show(args: argparse.Namespace) -> int:
    path = state_path(args, "phone")
    state = phone.load(path)
    print(f"device id: {state.device_id}")
    print(f"name: {state.name or '(unnamed)'}")
    print(f"server: {state.server}")
    if state.account_id:
        print(f"account id: {state.account_id}")
    print(f"state file: {path}")
    _print_peers(state)
    return 0


# relaybox phone connect


def add_connect_command(phone_commands: Subcommands) -> None:
    connect = command(
        phone_commands,
        "connect",
        summary="approve an AI assistant: confirm the code its consent page shows",
        description="Confirm the six-digit code shown on the consent page that an AI assistant (an MCP\n"
        "client) opened in your browser. The page then lists what the assistant asks for;\n"
        "untick what it should not do and choose Allow there.",
        run=_phone_connect,
    )
    connect.add_argument("code", metavar="CODE", help="the six-digit code on the consent page")
    add_state_option(connect, "phone")


def _phone_connect(args: argparse.Namespace) -> int:
    name = phone.confirm_connector(state_path(args, "phone"), args.code)
    print(f"confirmed: {name} asks to connect to this phone")
    print("approve on the page: choose what it may do, then Allow")
    return 0


# relaybox phone answer


def add_answer_command(phone_commands: Subcommands) -> None:
    answer = command(
        phone_commands,
        "answer",
        summary="answer a question the phone was asked (as tapping a button or typing a reply would)",
        description="Answer a question that `relaybox phone run` showed as `QUESTION [int_...]`, with\n"
        "the number of the chosen answer as shown there (0 is the first) and, where the\n"
        "question takes a typed reply (`[text]`), --text with it; a question without\n"
        "choices takes --text alone. The text is sealed to the server's key, which hands it\n"
        "to whoever asked. The first answer wins: a second one, or one after the question\n"
        "expired, is refused.",
        run=_phone_answer,
    )
    answer.add_argument("interaction_id", metavar="INTERACTION_ID", help="the question's id (int_...)")
    answer.add_argument(
        "choice", type=non_negative_int, nargs="?", metavar="N", help="the chosen answer's number"
    )
    answer.add_argument("--text", metavar="TEXT", help="a typed reply, where the question takes one")
    add_state_option(answer, "phone")


def _phone_answer(args: argparse.Namespace) -> int:
    if args.choice is None and args.text is None:
        raise ClientError("invalid_answer", "give the choice's number N, --text TEXT, or both")
    answered = phone.answer(state_path(args, "phone"), args.interaction_id, args.choice, args.text)
    how = [] if args.choice is None else [f"choice {answered.choice_index}"]
    how += [] if args.text is None else ["a typed reply"]
    print(f"answered {answered.interaction_id} with {' and '.join(how)} ({answered.status})")
    return 0


# relaybox phone ack


def add_ack_command(phone_commands: Subcommands) -> None:
    ack = command(
        phone_commands,
        "ack",
        summary="acknowledge an urgent notification, so that it stops repeating on every device",
        description="Acknowledge an urgent notification that `relaybox phone run` shows as\n"
        "`URGENT [rcp_...]` and repeats until acknowledged: the sender's receipt then says\n"
        "acknowledged, by this phone, and every device stops repeating it. The first\n"
        "acknowledgement wins; one that was cancelled or expired first is left so.",
        run=_phone_ack,
    )
    ack.add_argument("receipt", metavar="RECEIPT", help="the urgent notification's receipt (rcp_...)")
    add_state_option(ack, "phone")


def _phone_ack(args: argparse.Namespace) -> int:
    done = phone.acknowledge(state_path(args, "phone"), args.receipt)
    print(f"acknowledged {done.receipt} ({done.status})")
    return 0


def _print_peers(state: DeviceState) -> None:
    if not state.peers:
        print("paired devices: none")
        return
    print("paired devices:")
    for peer_id, peer in state.peers.items():
        print(f"  {peer_id}  {peer.name or '(unnamed)'} ({peer.surface_kind})")
        print(f"    safety number: {format_safety_number(state.safety_number_with(peer_id))}")
