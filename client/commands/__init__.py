"""The device-client commands of ``relaybox``: argparse wiring and output only.

The work happens in ``client.phone`` and ``client.computer``. Each module here holds one command
group: ``phone`` (the virtual phone), ``tokens``, ``pair``, ``follow`` (``tail``, ``phone run``),
``texts`` (``phone send``, ``send-text``) and ``files``. A new command keeps its logic in its own
module and is registered with ``command(...)`` from ``client.commands.wiring``, on the
``relaybox`` parser or on the ``phone`` group returned by ``add_phone_commands``; ``guarded`` turns
every ``ClientError`` into one ``error: code: message`` line on stderr and exit code 1.
"""

from __future__ import annotations

from client.commands.files import add_file_commands
from client.commands.follow import add_follow_commands
from client.commands.pair import add_pair_command
from client.commands.phone import (
    add_ack_command,
    add_answer_command,
    add_connect_command,
    add_phone_commands,
)
from client.commands.texts import add_text_commands
from client.commands.wiring import Subcommands


def add_commands(commands: Subcommands) -> None:
    """Register the client subcommands (``phone …``, ``pair``, ``tail``, ``send-text``) on the
    ``relaybox`` parser."""
    phone_commands = add_phone_commands(commands)
    add_connect_command(phone_commands)
    add_pair_command(commands)
    add_follow_commands(commands, phone_commands)
    add_text_commands(commands, phone_commands)
    add_answer_command(phone_commands)
    add_ack_command(phone_commands)
    add_file_commands(commands, phone_commands)
