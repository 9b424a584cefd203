"""``send-file`` and ``cancel-file`` (for the computer and the phone), and receiving files while
following a stream."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from client import transfers
from client.commands.wiring import Run, Subcommands, add_state_option, command, state_path
from client.dispatch import Dispatcher
from client.file_receiver import FileReceiver
from client.output import Output
from client.progress import Progress
from client.state import DeviceState, Role

# relaybox send-file, relaybox cancel-file (and the phone's)


def add_file_commands(commands: Subcommands, phone_commands: Subcommands) -> None:
    places: tuple[tuple[Subcommands, Role], ...] = ((commands, "computer"), (phone_commands, "phone"))
    for parent, role in places:
        other = "phone" if role == "computer" else "computer"
        send = command(
            parent,
            "send-file",
            summary=f"send a file to a paired device, end-to-end encrypted (default: the {other})",
            description="Encrypt PATH chunk by chunk (xchacha20poly1305-chunked-v1) for a paired device,\n"
            "upload the chunks through presigned URLs and offer the file to it. The server stores\n"
            "only ciphertext, deleted once the receiver has it (or after a day). `relaybox tail`\n"
            "and `relaybox phone run` receive it into their downloads folder. Ctrl-C cancels.",
            run=_send_file(role),
        )
        send.add_argument("file", type=Path, metavar="PATH", help="the file to send")
        send.add_argument(
            "--to", metavar="DEVICE", help="the device's id or name (default: the only paired one)"
        )
        add_state_option(send, role)

        cancel = command(
            parent,
            "cancel-file",
            summary="end a file transfer from either side (cancel as sender, decline as receiver)",
            description="End a transfer: its chunks are deleted from the server and the other device is\n"
            "told (`cancel` when this device sends the file, `decline` when it receives it).",
            run=_cancel_file(role),
        )
        cancel.add_argument("transfer_id", metavar="TRANSFER_ID", help="the transfer's id (xfr_...)")
        add_state_option(cancel, role)


def _send_file(role: Role) -> Run:
    def run(args: argparse.Namespace) -> int:
        path = state_path(args, role)
        file: Path = args.file.expanduser()
        sent = transfers.send_file(
            path, DeviceState.load(path, role=role), file, to=args.to, progress=progress_bar
        )
        print(f"offered {file.name} ({sent.size} bytes) to {sent.peer_name} (transfer {sent.transfer_id})")
        return 0

    return run


def _cancel_file(role: Role) -> Run:
    def run(args: argparse.Namespace) -> int:
        path = state_path(args, role)
        action = transfers.cancel_transfer(path, DeviceState.load(path, role=role), args.transfer_id)
        print(f"{'cancelled' if action == 'cancel' else 'declined'} {args.transfer_id}")
        return 0

    return run


def receive_files(
    dispatcher: Dispatcher,
    args: argparse.Namespace,
    path: Path,
    state: DeviceState,
    output: Output,
    downloads: Path,
) -> None:
    receiver = FileReceiver(
        path, state, output, downloads, decline_all=args.decline_files, progress=progress_bar
    )
    dispatcher.payloads[transfers.FILE_CTRL] = receiver.on_file_ctrl


def progress_bar(label: str, total: int) -> Progress:
    return Progress(label, total, sys.stderr)
