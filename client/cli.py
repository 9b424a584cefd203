"""The device-client commands of ``relaybox``: argparse wiring and output only.

The work happens in ``client.phone`` and ``client.computer``. A later command (``relaybox tail``,
``relaybox phone run``, ``relaybox phone connect``) keeps its logic in its own module and is
registered here with ``command(...)`` on ``commands`` or on the ``phone`` group returned by
``add_phone_commands``; ``guarded`` turns every ``ClientError`` into one ``error: code: message``
line on stderr and exit code 1.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeAlias

from client import computer, phone, transfers
from client.api import ApiError, TokenInfo
from client.file_receiver import FileReceiver
from client.phone_ops import DOWNLOADS_DIR, Output, PhoneOps
from client.progress import Progress
from client.state import ClientError, DeviceState, Paired, Role, default_state_path
from client.stream import (
    Dispatcher,
    Dropped,
    KeepAlive,
    Opener,
    Position,
    Received,
    Relayed,
    SyncFollower,
    default_dispatcher,
    load_last_seq,
)
from core.domain.safety import format_safety_number

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Run: TypeAlias = Callable[[argparse.Namespace], int]

SERVER_ENV = "RELAYBOX_SERVER"
DEFAULT_SERVER = "http://127.0.0.1:8787"
PRIORITIES = ("min", "low", "default", "high", "urgent")
SCOPES = ("phone:control",)
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


def add_commands(commands: Subcommands) -> None:
    """Register the client subcommands (``phone …``, ``pair``, ``tail``, ``send-text``) on the
    ``relaybox`` parser."""
    phone_commands = add_phone_commands(commands)
    add_connect_command(phone_commands)
    add_pair_command(commands)
    add_stream_commands(commands, phone_commands)
    add_answer_command(phone_commands)
    add_file_commands(commands, phone_commands)


# Building blocks for every client command.


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
        "--app-build", type=_non_negative_int, metavar="N", help="app build number to report"
    )
    register.add_argument("--force", action="store_true", help="replace an existing phone state file")
    add_state_option(register, "phone")

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


def add_token_commands(phone_commands: Subcommands) -> None:
    tokens = group(
        phone_commands,
        "tokens",
        summary="create, list and revoke sender tokens",
        description="Sender tokens let scripts send to this phone (POST /v1/send). Only the phone\n"
        "creates and revokes them; the plaintext is shown once, at creation.",
    )
    create = command(
        tokens,
        "create",
        summary="create a sender token and print it (shown once)",
        description="Create a sender token. The token is printed alone on stdout, exactly once; the\n"
        "server keeps only its hash.",
        run=_tokens_create,
    )
    create.add_argument("--label", required=True, help="what the token is for, e.g. 'backup script'")
    create.add_argument("--scope", choices=SCOPES, help="extra scope: phone:control (default: none)")
    create.add_argument(
        "--priority-cap",
        choices=PRIORITIES,
        metavar="P",
        help=f"highest priority the token may send: {', '.join(PRIORITIES)} (default: urgent)",
    )
    add_state_option(create, "phone")

    listing = command(
        tokens,
        "list",
        summary="list the account's active sender tokens",
        description="List the active sender tokens (id, label, scope, priority cap, dates); never\n"
        "their plaintext.",
        run=_tokens_list,
    )
    add_state_option(listing, "phone")

    revoke = command(
        tokens,
        "revoke",
        summary="revoke a sender token",
        description="Revoke a sender token by id; requests made with it are refused from then on.",
        run=_tokens_revoke,
    )
    revoke.add_argument("token_id", metavar="ID", help="the token's id (tok_...), as `tokens list` shows")
    add_state_option(revoke, "phone")


def _phone_register(args: argparse.Namespace) -> int:
    path = state_path(args, "phone")
    state = phone.register(
        path, server=args.server, name=args.name, app_build=args.app_build, force=args.force
    )
    print(f"registered phone {state.device_id} ({state.name or 'unnamed'}) on {state.server}")
    print(f"state saved to {path}")
    print(
        f"next: on the computer run `relaybox pair --server {state.server}`, then `relaybox phone pair CODE`"
    )
    return 0


def _phone_pair(args: argparse.Namespace) -> int:
    paired = phone.confirm_pairing(state_path(args, "phone"), args.code)
    print(f"paired with {_peer_label(paired)} ({paired.peer.surface_kind})")
    if paired.intent != "pair":
        print(f"code intent: {paired.intent}")
    _print_safety_number(paired.safety_number, "computer")
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


def _tokens_create(args: argparse.Namespace) -> int:
    created = phone.create_token(
        state_path(args, "phone"), label=args.label, scope=args.scope, priority_cap=args.priority_cap
    )
    info = created.info
    # The note goes to stderr so that stdout is the token alone: `TOKEN=$(relaybox phone tokens create …)`.
    print(
        f"created sender token {info.id} (label {info.label!r}, scope {info.scope or '-'}, "
        f"priority cap {info.priority_cap}); it is shown only this once, store it now:",
        file=sys.stderr,
        flush=True,
    )
    print(created.token, flush=True)
    return 0


def _tokens_list(args: argparse.Namespace) -> int:
    tokens = phone.list_tokens(state_path(args, "phone"))
    if not tokens:
        print("no active sender tokens")
        return 0
    print(_table(["ID", "LABEL", "SCOPE", "CAP", "CREATED", "LAST USED"], [_token_row(t) for t in tokens]))
    return 0


def _tokens_revoke(args: argparse.Namespace) -> int:
    revoked = phone.revoke_token(state_path(args, "phone"), args.token_id)
    print(f"revoked sender token {revoked.id} ({revoked.label})")
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
        type=_positive_float,
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
    print(f"paired with {_peer_label(paired)}")
    _print_safety_number(paired.safety_number, "phone")
    return 0


# relaybox tail, relaybox phone run, relaybox phone send, relaybox send-text

DEFAULT_IDLE_S = 1.0
ONCE_MAX_FAILURES = 3


def add_stream_commands(commands: Subcommands, phone_commands: Subcommands) -> None:
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
    _add_follow_options(tail)
    tail.add_argument(
        "--downloads",
        type=Path,
        metavar="DIR",
        help="where received files are saved (default: Downloads beside the state file)",
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
        "It also acts as the phone: reminders are armed (kept in the state file across\n"
        "restarts) and print `REMINDER: <message>` at their time; questions print\n"
        "`QUESTION [int_...]: <question>` with numbered choices and are answered with\n"
        "--answer N, by typing a number (when stdin is a terminal) or later with\n"
        "`relaybox phone answer`; a ring prints `RING for <n> s`; documents are pulled and\n"
        "saved into --downloads (`SAVED <path>`), never replacing an existing file.",
        run=_phone_run,
    )
    _add_follow_options(run)
    run.add_argument(
        "--answer",
        type=_non_negative_int,
        metavar="N",
        help="answer every question at once with choice N (0 is the first), e.g. in scripts",
    )
    run.add_argument(
        "--downloads",
        type=Path,
        metavar="DIR",
        help="where received documents are saved (default: Downloads beside the state file)",
    )
    add_state_option(run, "phone")

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


def _add_follow_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--since",
        type=_non_negative_int,
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
        type=_positive_float,
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
    downloads = args.downloads.expanduser() if args.downloads is not None else path.parent / DOWNLOADS_DIR
    dispatcher = default_dispatcher()
    _receive_files(dispatcher, args, path, state, output, downloads)
    return _follow(args, path, state, dispatcher, output)


def _receive_files(
    dispatcher: Dispatcher,
    args: argparse.Namespace,
    path: Path,
    state: DeviceState,
    output: Output,
    downloads: Path,
) -> None:
    receiver = FileReceiver(
        path, state, output, downloads, decline_all=args.decline_files, progress=_progress_bar
    )
    dispatcher.payloads[transfers.FILE_CTRL] = receiver.on_file_ctrl


def _progress_bar(label: str, total: int) -> Progress:
    return Progress(label, total, sys.stderr)


def _phone_run(args: argparse.Namespace) -> int:
    path = state_path(args, "phone")
    state = phone.load(path)
    output = Output(as_json=args.json)
    downloads: Path | None = args.downloads.expanduser() if args.downloads is not None else None
    interactive = args.answer is None and _stdin_is_terminal()
    ops = PhoneOps(path, state, output, answer=args.answer, interactive=interactive, downloads=downloads)
    with ops:
        dispatcher = phone.run_dispatcher(path, ops)
        _receive_files(dispatcher, args, path, state, output, ops.downloads)
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
    stopper = _Stopper()
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


class _Stopper:
    """Ctrl-C and SIGTERM stop a follower between events, never halfway through one, so the
    ``last_seq`` it saves is exactly the last event it printed."""

    def __init__(self) -> None:
        self._busy = False
        self._requested = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Stopper:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def _on_signal(self, _signum: int, _frame: object) -> None:
        if self._busy:
            self._requested = True
        else:
            raise KeyboardInterrupt

    @contextmanager
    def deferred(self) -> Iterator[None]:
        self._busy = True
        try:
            yield
        finally:
            self._busy = False
        if self._requested:
            raise KeyboardInterrupt


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
            path, DeviceState.load(path, role=role), file, to=args.to, progress=_progress_bar
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


# relaybox phone answer


def add_answer_command(phone_commands: Subcommands) -> None:
    answer = command(
        phone_commands,
        "answer",
        summary="answer a question the phone was asked (as tapping a button would)",
        description="Answer a question that `relaybox phone run` showed as `QUESTION [int_...]`, with\n"
        "the number of the chosen answer as shown there (0 is the first). The first answer\n"
        "wins: a second one, or one after the question expired, is refused.",
        run=_phone_answer,
    )
    answer.add_argument("interaction_id", metavar="INTERACTION_ID", help="the question's id (int_...)")
    answer.add_argument("choice", type=_non_negative_int, metavar="N", help="the chosen answer's number")
    add_state_option(answer, "phone")


def _phone_answer(args: argparse.Namespace) -> int:
    answered = phone.answer(state_path(args, "phone"), args.interaction_id, args.choice)
    print(f"answered {answered.interaction_id} with choice {answered.choice_index} ({answered.status})")
    return 0


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


# Output helpers.


def _peer_label(paired: Paired) -> str:
    return paired.peer.name or paired.peer_id


def _print_safety_number(number: str, other: str) -> None:
    print(f"safety number: {format_safety_number(number)}")
    print(f"compare it with the number on the {other}; if they differ, do not trust this pairing", flush=True)


def _print_peers(state: DeviceState) -> None:
    if not state.peers:
        print("paired devices: none")
        return
    print("paired devices:")
    for peer_id, peer in state.peers.items():
        print(f"  {peer_id}  {peer.name or '(unnamed)'} ({peer.surface_kind})")
        print(f"    safety number: {format_safety_number(state.safety_number_with(peer_id))}")


def _token_row(token: TokenInfo) -> list[str]:
    return [
        token.id,
        token.label,
        token.scope or "-",
        token.priority_cap,
        _when(token.created_at),
        _when(token.last_used_at) if token.last_used_at is not None else "never",
    ]


def _when(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    return "\n".join(lines)


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value
