"""Relaying a text to a paired device's clipboard: ``relaybox phone send`` and ``relaybox send-text``."""

from __future__ import annotations

import argparse
import sys

from client import computer, phone
from client.commands.wiring import Subcommands, add_state_option, command, state_path
from client.relay import Relayed


def add_text_commands(commands: Subcommands, phone_commands: Subcommands) -> None:
    send = command(
        phone_commands,
        "send",
        summary="send a text to a paired computer (its clipboard), end-to-end encrypted",
        description="Send TEXT to a paired computer as a clipboard message, sealed to its key; the\n"
        "server only relays it. With several paired computers choose one with --to.",
        run=_phone_send,
    )
    send.add_argument("text", metavar="TEXT", help="the text to send; `-` reads it from standard input")
    send.add_argument(
        "--to", metavar="DEVICE", help="the computer's device id or name (default: the only paired one)"
    )
    add_state_option(send, "phone")

    send_text = command(
        commands,
        "send-text",
        summary="send a text to your phone (its clipboard), end-to-end encrypted",
        description="Send TEXT from this computer to the paired phone as a clipboard message, sealed\n"
        "to the phone's key; the server only relays it.",
        run=_send_text,
    )
    send_text.add_argument("text", metavar="TEXT", help="the text to send; `-` reads it from standard input")
    add_state_option(send_text, "computer")


def _phone_send(args: argparse.Namespace) -> int:
    sent = phone.relay_text(state_path(args, "phone"), _text_argument(args.text), to=args.to)
    _print_sent(sent)
    return 0


def _send_text(args: argparse.Namespace) -> int:
    sent = computer.relay_text(state_path(args, "computer"), _text_argument(args.text))
    _print_sent(sent)
    return 0


def _text_argument(text: str) -> str:
    return sys.stdin.read() if text == "-" else text


def _print_sent(sent: Relayed) -> None:
    print(f"sent to {sent.peer.name or sent.peer_id} (seq {sent.seq}, {sent.msg_id})")
