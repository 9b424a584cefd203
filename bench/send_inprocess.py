"""A send's CPU in-process: ``send_notification`` as ``POST /v1/send`` runs it (a transaction of its
own, no HTTP), to an account of 2 devices and one of 22, queues full (steady state), on SQLite and
PostgreSQL.
An HTTP bench on a noisy 2-core machine cannot resolve a few µs a device; this one, run
alternately from two checkouts (``bench/ab-queue.md``), can.

    .venv/bin/python bench/send_inprocess.py [--sends 400] [--rounds 3] [--no-postgres]

Prints, per backend, the CPU of this process per send to 2 and to 22 devices (the median of the
rounds, each the mean of ``--sends`` sends after 250 to fill the queues) and the cost of each
extra device: (22-device send - 2-device send) / 20. Run from the checkout to measure, with its
virtualenv: the script imports relaybox and the test helpers from the current directory.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))

from starlette.testclient import TestClient

from app.assembly import create_app
from core.bootstrap import build_core
from core.principal import Principal
from core.runtime.core import Core
from core.services.auth import Accept, authenticate
from core.services.send import send_notification
from core.settings import explicit_settings
from tests.helpers import create_token, pair_computer, register_phone
from tests.services import fresh_postgres_database

RAISED = 10**9
LIMITS = dict.fromkeys(
    ("limit_token_burst", "limit_token_monthly", "limit_receiver_daily", "limit_ip_minute"), RAISED
)
LIMITS |= {
    "limit_ip_hour": RAISED,
    "register_per_ip_per_minute": RAISED,
    "pair_init_per_ip_per_minute": RAISED,
}
IP = "10.0.0.1"
FILL = 250  # sends before measuring: every queue past its cap of 200


def measure(database_url: str, data_dir: Path, sends: int, rounds: int) -> tuple[float, float]:
    """CPU µs per send to 2 devices and to 22 (medians of the rounds)."""
    settings = explicit_settings(data_dir=data_dir, database_url=database_url, log_level="warning", **LIMITS)
    core = build_core(settings)
    try:
        senders = []
        with TestClient(create_app(core=core)) as client:  # the accounts, paired as devices do
            for computers in (1, 21):
                phone = register_phone(client)
                for n in range(computers):
                    pair_computer(client, phone, name=f"laptop {n}")
                token = str(create_token(client, phone)["token"])
                anonymous = Principal.anonymous(IP)
                senders.append(
                    core.run_sync(authenticate, anonymous, token=token, accept=Accept.SENDER_TOKEN)
                )
        for principal in senders:
            for _ in range(FILL):
                send(core, principal)
        figures: list[list[float]] = [[], []]
        for _ in range(rounds):
            for index, principal in enumerate(senders):
                started = time.process_time()
                for _ in range(sends):
                    send(core, principal)
                figures[index].append((time.process_time() - started) / sends * 1e6)
        return statistics.median(figures[0]), statistics.median(figures[1])
    finally:
        core.engine.dispose()


def send(core: Core, principal: Principal) -> None:
    """One send as ``POST /v1/send`` makes it, in a transaction of its own (its events dropped)."""
    out = core.run_sync(send_notification, principal, fields={"message": "x" * 120}, ip=IP)
    assert out.delivered_to


@contextlib.contextmanager
def backends(postgres: bool) -> Iterator[list[tuple[str, str]]]:
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        chosen = [("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}")]
        if postgres:
            chosen.append(("postgres", stack.enter_context(fresh_postgres_database())))
        yield chosen


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sends", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    with backends(not args.no_postgres) as chosen, tempfile.TemporaryDirectory() as data:
        for name, url in chosen:
            two, many = measure(url, Path(data) / name, args.sends, args.rounds)
            device = (many - two) / 20
            print(
                f"{name}: 2 devices {two:.0f} µs, 22 devices {many:.0f} µs a send, +{device:.1f} µs a device"
            )


if __name__ == "__main__":
    main()
