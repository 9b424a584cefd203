"""Following a device's event stream: ``relaybox tail`` and ``relaybox phone run``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from client import phone
from client.commands.files import receive_files
from client.commands.stopper import Stopper
from client.commands.wiring import (
    Subcommands,
    add_state_option,
    command,
    non_negative_int,
    positive_float,
    state_path,
)
from client.dispatch import Dispatcher, default_dispatcher
from client.downloads import DEFAULT_HELP, default_downloads_dir
from client.opener import Dropped, Opener, Received
from client.output import Output
from client.phone_ops import PhoneOps
from client.position import Position, load_last_seq
from client.state import DeviceState
from client.sync_follower import KeepAlive, SyncFollower

# relaybox tail, relaybox phone run, relaybox phone send, relaybox send-text

DEFAULT_IDLE_S = 1.0
ONCE_MAX_FAILURES = 3


def add_follow_commands(commands: Subcommands, phone_commands: Subcommands) -> None:
    tail = command(
        commands,
        "tail",
        summary="follow this device's event stream and print each event, decrypted",
        description="Follow the server's event stream for this device (GET /v1/sync) and print each\n"
        "event decrypted, one line per event, e.g. `[seq 12] clipboard from Pixel: hello`.\n"
        "Reconnects by itself after a dropped connection, resuming after the last event, so\n"
        "nothing is missed or repeated. The last seq is kept in the state file (`last_seq`):\n"
        "the next run resumes there unless --since is given. Works with a computer's or a\n"
        "phone's state. Stops on Ctrl-C, or with an error once the device is disconnected.",
        run=_tail,
    )
    add_follow_options(tail)
    tail.add_argument(
        "--downloads",
        type=Path,
        metavar="DIR",
        help=f"where received files are saved (default: {DEFAULT_HELP['computer']})",
    )
    add_state_option(tail, "computer")

    run = command(
        phone_commands,
        "run",
        summary="listen as the phone: print every push and message it receives, decrypted",
        description="Run the virtual phone: follow its event stream and print every message and push\n"
        "it receives, decrypted: notifications, clipboard texts from computers, wake-ups\n"
        "(`notify`), registration challenges and disconnects. Resumes after the last event\n"
        "seen (`last_seq` in the state file) unless --since is given. Stops on Ctrl-C.\n\n"
        "A notification shows the emoji of its tags before its title, its Markdown source marked\n"
        "`(markdown)`, then its other tags, link, icon and buttons (`[1] label → url (view)` or\n"
        "`(http POST)`); one sent with the sequence_id of an earlier one prints\n"
        "`notification (replaces <seq>): …`, and a clear prints `notification cleared: <seq>`.\n\n"
        "It also acts as the phone: reminders are armed (kept in the state file across\n"
        "restarts) and print `REMINDER: <message>` at their time; questions print\n"
        "`QUESTION [int_...]: <question>` with numbered choices (and `[text]` when a typed\n"
        "reply is allowed) and are answered with --answer N (--answer-text TEXT), by typing a\n"
        "number and maybe a reply (when stdin is a terminal) or later with\n"
        "`relaybox phone answer`; a ring prints `RING for <n> s`; documents are pulled and\n"
        "saved into --downloads (`SAVED <path>`), never replacing an existing file. An urgent\n"
        "notification sent with repeat prints `URGENT [rcp_...]: <message>`, then\n"
        "`URGENT (repeat N) ...` with the bell every repeat seconds until it is acknowledged\n"
        "(type `ack` when stdin is a terminal, or `relaybox phone ack RECEIPT`), cancelled by\n"
        "its sender, or expired.",
        run=_phone_run,
    )
    add_follow_options(run)
    run.add_argument(
        "--answer",
        type=non_negative_int,
        metavar="N",
        help="answer every question at once with choice N (0 is the first), e.g. in scripts",
    )
    run.add_argument(
        "--answer-text",
        metavar="TEXT",
        help="answer with this typed reply too where a question takes one (alone where it has no choices)",
    )
    run.add_argument(
        "--downloads",
        type=Path,
        metavar="DIR",
        help=f"where received files, documents and attachments are saved (default: {DEFAULT_HELP['phone']})",
    )
    add_state_option(run, "phone")


def add_follow_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--since",
        type=non_negative_int,
        metavar="N",
        help="start after seq N (0: everything still queued) instead of after the saved last_seq",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object per event: seq, event, from, type, payload (and inline for pushes)",
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="print what is queued, then exit once no event arrived for --idle seconds",
    )
    parser.add_argument(
        "--idle",
        type=positive_float,
        default=DEFAULT_IDLE_S,
        metavar="S",
        help="with --once: the quiet time that counts as drained (default: %(default)g)",
    )
    parser.add_argument(
        "--decline-files",
        action="store_true",
        help="decline every file offered to this device instead of saving it",
    )


def _tail(args: argparse.Namespace) -> int:
    path = state_path(args, "computer")
    state = DeviceState.load(path)
    output = Output(as_json=args.json)
    given: Path | None = args.downloads
    downloads = given.expanduser() if given is not None else default_downloads_dir("computer")
    dispatcher = default_dispatcher()
    receive_files(dispatcher, args, path, state, output, downloads)
    return _follow(args, path, state, dispatcher, output)


def _phone_run(args: argparse.Namespace) -> int:
    path = state_path(args, "phone")
    state = phone.load(path)
    output = Output(as_json=args.json)
    downloads: Path | None = args.downloads.expanduser() if args.downloads is not None else None
    interactive = args.answer is None and args.answer_text is None and _stdin_is_terminal()
    ops = PhoneOps(
        path,
        state,
        output,
        answer=args.answer,
        answer_text=args.answer_text,
        interactive=interactive,
        downloads=downloads,
    )
    with ops:
        dispatcher = phone.run_dispatcher(path, ops)
        receive_files(dispatcher, args, path, state, output, ops.downloads)
        return _follow(args, path, state, dispatcher, output)


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):
        return False


def _follow(
    args: argparse.Namespace, path: Path, state: DeviceState, dispatcher: Dispatcher, output: Output
) -> int:
    since: int | None = args.since if args.since is not None else load_last_seq(path)
    position = Position(path, state.device_id, since)
    opener = Opener(path, state)
    start = f"after seq {since}" if since is not None else "from the oldest queued event"
    output.note(f"following {state.server} as {state.name or state.device_id} ({state.role}) {start}")
    follower = SyncFollower(
        state.server,
        state.device_token,
        after=since,
        idle=args.idle if args.once else None,
        max_failures=ONCE_MAX_FAILURES if args.once else None,
        notice=output.note,
    )
    stopper = Stopper()
    try:
        with follower, stopper:
            for item in follower.events():
                with stopper.deferred():  # an event is printed and counted, or neither
                    if isinstance(item, KeepAlive):
                        position.flush()
                        continue
                    _show(opener.open(item), dispatcher, output)
                    if not item.live:  # a live push has no sequence id: it never moves the position
                        position.advance(item.seq)
    except KeyboardInterrupt:
        output.note(f"stopped; the next run resumes after seq {position.seq or 0}")
    except BrokenPipeError:
        # The reader went away (`relaybox tail | head`); what it did not take is not counted.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        position.flush()
    return 0


def _show(opened: Received | Dropped, dispatcher: Dispatcher, output: Output) -> None:
    if isinstance(opened, Dropped):
        output.note(
            f"warning: dropped seq {opened.seq} ({opened.event} from {opened.sender}): {opened.reason}"
        )
        return
    line = dispatcher.describe(opened)  # describers may act, so they run in either mode
    if not line:
        return  # the describer showed the event itself (client.phone_ops)
    output.line(json.dumps(opened.to_json(), ensure_ascii=False) if output.as_json else line)
