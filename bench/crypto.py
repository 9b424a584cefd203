"""Envelope seal+open throughput: BoxCache/PairBox against PyNaCl's precomputed Box.

    .venv/bin/python bench/crypto.py [--messages N] [--rounds R] [--sizes 200 1500] [--devices D]

Both sides run in the same process, in alternating rounds (the order flips every round) to
spread drift and noise evenly. Each side seals a message from the server key to one of D
device keys and opens it on the device side. The baseline is raw `Box.encrypt`/`Box.decrypt`
with the shared keys computed once up front (no version byte, no cache lookup). The goal is
to stay within 1.5x of it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

from nacl.public import Box, PrivateKey

from core.domain.envelope import BoxCache

GOAL_RATIO = 1.5


def candidate_runner(
    server_secret: bytes, server_public: bytes, devices: list[tuple[bytes, bytes]]
) -> Callable[[list[bytes]], None]:
    cache = BoxCache()

    def run(plaintexts: list[bytes]) -> None:
        count = len(devices)
        for i, plaintext in enumerate(plaintexts):
            device_secret, device_public = devices[i % count]
            blob = cache.get(server_secret, device_public).seal(plaintext)
            if cache.get(device_secret, server_public).open(blob) != plaintext:
                raise AssertionError("round trip failed")

    return run


def baseline_runner(
    server_secret: bytes, server_public: bytes, devices: list[tuple[bytes, bytes]]
) -> Callable[[list[bytes]], None]:
    server_key = PrivateKey(server_secret)
    pairs = [
        (Box(server_key, PrivateKey(secret).public_key), Box(PrivateKey(secret), server_key.public_key))
        for secret, _ in devices
    ]

    def run(plaintexts: list[bytes]) -> None:
        count = len(pairs)
        for i, plaintext in enumerate(plaintexts):
            sender, recipient = pairs[i % count]
            if recipient.decrypt(sender.encrypt(plaintext)) != plaintext:
                raise AssertionError("round trip failed")

    return run


def timed(run: Callable[[list[bytes]], None], plaintexts: list[bytes]) -> float:
    start = time.perf_counter()
    run(plaintexts)
    return len(plaintexts) / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=10000, help="seal+open operations per round and side")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds per size")
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 1500], help="plaintext sizes in bytes")
    parser.add_argument("--devices", type=int, default=16, help="distinct device keys messages rotate over")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the goal is missed")
    args = parser.parse_args(argv)
    if args.messages < 1 or args.rounds < 1 or args.devices < 1 or min(args.sizes) < 0:
        parser.error("messages, rounds and devices must be positive; sizes must not be negative")

    server = PrivateKey.generate()
    server_secret, server_public = bytes(server), bytes(server.public_key)
    device_keys = [PrivateKey.generate() for _ in range(args.devices)]
    devices = [(bytes(key), bytes(key.public_key)) for key in device_keys]
    candidate = candidate_runner(server_secret, server_public, devices)
    baseline = baseline_runner(server_secret, server_public, devices)

    print(f"seal+open per message, {args.messages} messages x {args.rounds} rounds, {args.devices} devices")
    print(f"{'size':>6}  {'BoxCache/PairBox':>18}  {'nacl Box (baseline)':>20}  {'slowdown':>9}")
    missed = False
    for size in args.sizes:
        plaintexts = [bytes([i % 256]) * size for i in range(args.messages)]
        candidate(plaintexts[: args.devices * 2])  # warm the cache and the code paths
        baseline(plaintexts[: args.devices * 2])
        ours: list[float] = []
        theirs: list[float] = []
        for round_number in range(args.rounds):
            if round_number % 2 == 0:
                ours.append(timed(candidate, plaintexts))
                theirs.append(timed(baseline, plaintexts))
            else:
                theirs.append(timed(baseline, plaintexts))
                ours.append(timed(candidate, plaintexts))
        ours_ops, theirs_ops = statistics.median(ours), statistics.median(theirs)
        ratio = theirs_ops / ours_ops
        missed = missed or ratio > GOAL_RATIO
        print(f"{size:>5}B  {ours_ops:>14,.0f} op/s  {theirs_ops:>15,.0f} op/s  {ratio:>8.2f}x")
    verdict = "met" if not missed else "MISSED"
    print(f"goal: within {GOAL_RATIO}x of the baseline (slowdown = baseline op/s / ours, medians): {verdict}")
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
