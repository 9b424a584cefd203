"""``relaybox phone tokens``: create, list and revoke sender tokens."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from client import phone
from client.commands.wiring import Subcommands, add_state_option, command, group, state_path
from client.device_api import TokenInfo

PRIORITIES = ("min", "low", "default", "high", "urgent")
SCOPES = ("phone:control",)


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
    create.add_argument(
        "--format",
        choices=("relaybox", "pushover"),
        help="relaybox (default): rfk_live_ + 32 characters, which secret scanners recognise; pushover: "
        "30 letters and digits, for Pushover client libraries that check a token's shape (chump)",
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


def _tokens_create(args: argparse.Namespace) -> int:
    created = phone.create_token(
        state_path(args, "phone"),
        label=args.label,
        scope=args.scope,
        priority_cap=args.priority_cap,
        token_format=args.format,
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
