"""Sealing an envelope: relaybox's seal against PyNaCl's seal alone, like for like.

    .venv/bin/python bench/crypto.py [--messages 10000] [--rounds 7] [--sizes 200 1500] [--devices 16]

What a send does per device is seal: the server key to the device's key, a fresh random nonce,
``0x01 ‖ nonce ‖ XSalsa20-Poly1305 box``. Every side below does exactly that, to one of ``--devices``
device keys in turn, with the X25519 shared key computed once per device up front, in one process:

- baseline, PyNaCl's seal alone: ``nacl.utils.random(24)`` and ``nacl.bindings.crypto_box_easy_afternm``
  on the precomputed shared key, the version byte and nonce put in front (the same wire bytes);
- relaybox ``PairBox.seal``: the seal itself (``core.domain.envelope``), the shared key held;
- relaybox ``ServerKeys.seal_to``: what a send calls per device: the ``BoxCache`` lookup of the
  device's shared key, then ``PairBox.seal`` (``core.server_keys``);
- for reference, PyNaCl's ``Box.encrypt`` wrapper (what this bench used to compare against: it also
  builds an ``EncryptedMessage``, so it flattered relaybox).

Opening is not timed (the server does not open envelopes). Every envelope each side produced is
checked after its round, outside the timing: version byte, length, and it opens with the device's
key to the plaintext. Rounds alternate the sides (the order rotates every round); the table shows
per size the median operations per second, the median CPU per operation (this process), and the
slowdown against the baseline (baseline op/s ÷ the side's). Goal: relaybox's send path
(``seal_to``) within 1.5x of PyNaCl's seal alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import nacl.bindings
import nacl.utils
from nacl.public import Box, PrivateKey, PublicKey

from core.domain.envelope import PairBox
from core.server_keys import ServerKeys
from lifecycle import code_note, goal
from meter import CpuMeter

GOAL_RATIO = 1.5
VERSION = b"\x01"
NONCE = 24
TAG = 16
Seal = Callable[[int, bytes], bytes]  # (device index, plaintext) -> envelope


@dataclass(frozen=True)
class Keys:
    server_secret: bytes
    device_secrets: list[bytes]
    device_publics: list[bytes]
    shared: list[bytes]  # crypto_box_beforenm(device public, server secret)


def make_keys(devices: int) -> Keys:
    server = PrivateKey.generate()
    secrets = [PrivateKey.generate() for _ in range(devices)]
    publics = [bytes(key.public_key) for key in secrets]
    shared = [nacl.bindings.crypto_box_beforenm(public, bytes(server)) for public in publics]
    return Keys(bytes(server), [bytes(key) for key in secrets], publics, shared)


def sides(keys: Keys) -> dict[str, Seal]:
    """Each side's seal, set up (shared keys computed) before any timing."""
    shared = keys.shared
    boxes = [PairBox(keys.server_secret, public) for public in keys.device_publics]
    server_keys = ServerKeys.from_secret(keys.server_secret)
    publics = keys.device_publics
    for public in publics:
        server_keys.seal_to(public, b"")  # every device's shared key in the cache, as on a busy server
    wrappers = [Box(PrivateKey(keys.server_secret), PublicKey(public)) for public in publics]

    def baseline(device: int, plaintext: bytes) -> bytes:
        nonce = nacl.utils.random(NONCE)
        return VERSION + nonce + nacl.bindings.crypto_box_easy_afternm(plaintext, nonce, shared[device])

    def wrapper(device: int, plaintext: bytes) -> bytes:
        return VERSION + bytes(wrappers[device].encrypt(plaintext))

    return {
        "PyNaCl seal alone": baseline,
        "PairBox.seal": lambda device, plaintext: boxes[device].seal(plaintext),
        "ServerKeys.seal_to": lambda device, plaintext: server_keys.seal_to(publics[device], plaintext),
        "PyNaCl Box.encrypt": wrapper,
    }


@dataclass
class Timing:
    ops_per_s: list[float]
    cpu_us: list[float]


def timed(seal: Seal, plaintexts: list[bytes], devices: int) -> tuple[float, float, list[bytes]]:
    """Seal every plaintext (device i mod D): op/s, CPU µs per op, and the envelopes."""
    sealed: list[bytes] = []
    append = sealed.append
    cpu, wall = time.process_time(), time.perf_counter()
    for i, plaintext in enumerate(plaintexts):
        append(seal(i % devices, plaintext))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return len(plaintexts) / wall, cpu * 1e6 / len(plaintexts), sealed


def check(name: str, sealed: list[bytes], plaintexts: list[bytes], keys: Keys) -> None:
    """Every envelope: the version byte, the length, and it opens to its plaintext on the device."""
    count = len(keys.shared)
    for i, (blob, plaintext) in enumerate(zip(sealed, plaintexts, strict=True)):
        nonce, box = blob[1 : 1 + NONCE], blob[1 + NONCE :]
        opened = nacl.bindings.crypto_box_open_easy_afternm(box, nonce, keys.shared[i % count])
        if blob[:1] != VERSION or len(blob) != 1 + NONCE + TAG + len(plaintext) or opened != plaintext:
            raise AssertionError(f"{name}: envelope {i} is wrong")


def measure(keys: Keys, size: int, args: argparse.Namespace) -> dict[str, Timing]:
    seals = sides(keys)
    plaintexts = [bytes([i % 256]) * size for i in range(args.messages)]
    timings = {name: Timing([], []) for name in seals}
    order = list(seals)
    for seal in seals.values():  # warm the code paths
        timed(seal, plaintexts[: args.devices * 2], args.devices)
    for round_number in range(args.rounds):
        rotated = order[round_number % len(order) :] + order[: round_number % len(order)]
        for name in rotated:
            ops, cpu_us, sealed = timed(seals[name], plaintexts, args.devices)
            check(name, sealed, plaintexts, keys)
            timings[name].ops_per_s.append(ops)
            timings[name].cpu_us.append(cpu_us)
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=10000, help="seals per round and side")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds per size")
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 1500], help="plaintext sizes in bytes")
    parser.add_argument("--devices", type=int, default=16, help="distinct device keys the seals rotate over")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the goal is missed")
    args = parser.parse_args(argv)
    if args.messages < 1 or args.rounds < 1 or args.devices < 1 or min(args.sizes) < 0:
        parser.error("messages, rounds and devices must be positive; sizes must not be negative")

    print(code_note())
    keys = make_keys(args.devices)
    meter = CpuMeter([])
    start = meter.snapshot()
    print(f"seal per message, {args.messages} messages x {args.rounds} rounds, {args.devices} devices")
    print(f"{'size':>6}  {'side':<20} {'op/s':>11} {'CPU µs/op':>10} {'slowdown':>9}")
    slowdowns: list[str] = []
    met = True
    for size in args.sizes:
        timings = measure(keys, size, args)
        base = statistics.median(timings["PyNaCl seal alone"].ops_per_s)
        for name, timing in timings.items():
            ops, cpu = statistics.median(timing.ops_per_s), statistics.median(timing.cpu_us)
            print(f"{size:>5}B  {name:<20} {ops:>11,.0f} {cpu:>10.2f} {base / ops:>8.2f}x")
        slowdown = base / statistics.median(timings["ServerKeys.seal_to"].ops_per_s)
        slowdowns.append(f"{slowdown:.2f}x at {size} B")
        met = met and slowdown <= GOAL_RATIO
    print("every envelope checked (version, length, opens to its plaintext)")
    print(meter.since(start).others_note())
    goal(f"ServerKeys.seal_to within {GOAL_RATIO}x of PyNaCl's seal alone", met, ", ".join(slowdowns))
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
