"""What the benchmarks measure CPU with, and their statistics: the CPU a process has used (from
``/proc/<pid>/stat``), the CPU of the PostgreSQL and Redis servers, the whole machine's busy time
(``/proc/stat``) and from it what every *other* process used while a benchmark measured, so a report
can say whether the machine was idle.

The scripts import it as ``meter`` (``bench/`` is on ``sys.path``); it is not a benchmark.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
STORE_PROCESSES = frozenset({"postgres", "redis-server"})  # /proc/<pid>/comm of the store's servers
IDLE_OTHERS = 0.10  # other processes under this share of one core: the machine counts as idle


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds a process (all its threads) has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def processes() -> dict[int, tuple[str, float]]:
    """Every process now: its name (``comm``) and CPU seconds so far (those that vanish are skipped)."""
    found: dict[int, tuple[str, float]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                name = Path(entry.path, "comm").read_text().strip()
                found[int(entry.name)] = (name, process_cpu_s(int(entry.name)))
            except (OSError, IndexError, ValueError):
                continue  # it ended meanwhile
    return found


@dataclass(frozen=True)
class MachineTimes:
    """CPU seconds the whole machine (every core) has spent since boot, from ``/proc/stat``."""

    busy_s: float  # running processes: user, nice, system and steal time
    interrupts_s: float  # irq and softirq: a benchmark's loopback traffic is handled here, by no process
    idle_s: float  # idle and iowait

    def __sub__(self, start: MachineTimes) -> MachineTimes:
        return MachineTimes(
            self.busy_s - start.busy_s, self.interrupts_s - start.interrupts_s, self.idle_s - start.idle_s
        )


def machine_times() -> MachineTimes:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    busy, interrupts, waiting = user + nice + system + steal, irq + softirq, idle + iowait
    return MachineTimes(busy / CLOCK_TICKS, interrupts / CLOCK_TICKS, waiting / CLOCK_TICKS)


@dataclass(frozen=True)
class CpuUse:
    """CPU seconds used over ``wall_s`` seconds: by the measured servers, this process (the load
    generator), the PostgreSQL and Redis servers and everything else on the machine; and the
    machine's interrupt handling (no process's) and idle time over the same seconds."""

    wall_s: float = 0.0
    server_s: float = 0.0
    bench_s: float = 0.0
    store_s: float = 0.0
    others_s: float = 0.0
    interrupts_s: float = 0.0
    idle_s: float = 0.0

    def __add__(self, other: CpuUse) -> CpuUse:
        return CpuUse(
            self.wall_s + other.wall_s,
            self.server_s + other.server_s,
            self.bench_s + other.bench_s,
            self.store_s + other.store_s,
            self.others_s + other.others_s,
            self.interrupts_s + other.interrupts_s,
            self.idle_s + other.idle_s,
        )

    def share(self, seconds: float) -> float:
        """``seconds`` of CPU as a share of one core over the wall time (1.0 = one core busy)."""
        return seconds / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def others(self) -> float:
        return self.share(self.others_s)

    @property
    def idle_machine(self) -> bool:
        return self.others < IDLE_OTHERS

    def others_note(self) -> str:
        """What the rest of the machine did meanwhile, in one phrase."""
        verdict = "idle otherwise" if self.idle_machine else "NOT idle"
        return f"other processes used {self.others:.0%} of a core meanwhile: machine {verdict}"


def total(uses: Iterable[CpuUse]) -> CpuUse:
    """The sum of several measurements (their wall times added up too)."""
    summed = CpuUse()
    for use in uses:
        summed += use
    return summed


@dataclass(frozen=True)
class CpuSnapshot:
    at: float
    server_s: float
    bench_s: float
    store: dict[int, float]
    machine: MachineTimes


class CpuMeter:
    """Snapshots of the CPU used so far by ``pids`` (the servers measured), this process, the store's
    servers and the machine; ``since`` turns two of them into a ``CpuUse``."""

    def __init__(self, pids: Sequence[int]) -> None:
        self.pids = tuple(pids)

    def snapshot(self) -> CpuSnapshot:
        store = {pid: cpu for pid, (name, cpu) in processes().items() if name in STORE_PROCESSES}
        return CpuSnapshot(
            at=time.perf_counter(),
            server_s=sum(process_cpu_s(pid) for pid in self.pids),
            bench_s=time.process_time(),
            store=store,
            machine=machine_times(),
        )

    def since(self, start: CpuSnapshot) -> CpuUse:
        end = self.snapshot()
        server, bench = end.server_s - start.server_s, end.bench_s - start.bench_s
        store = sum(cpu - start.store.get(pid, 0.0) for pid, cpu in end.store.items())
        machine = end.machine - start.machine
        # /proc counts in clock ticks per process: the difference can dip a tick below zero.
        others = max(0.0, machine.busy_s - server - bench - store)
        wall = end.at - start.at
        return CpuUse(wall, server, bench, max(0.0, store), others, machine.interrupts_s, machine.idle_s)


def busy_others(own: Sequence[int], window_s: float = 1.0, threshold: float = 0.05) -> list[str]:
    """The other processes that used more than ``threshold`` of a core over ``window_s`` (a ``top``
    of this machine, this process and ``own`` left out), busiest first."""
    skip = {os.getpid(), *own}
    before = processes()
    time.sleep(window_s)
    after = processes()
    busy = [
        (cpu - before[pid][1], f"{name} (pid {pid})")
        for pid, (name, cpu) in after.items()
        if pid in before and pid not in skip
    ]
    return [f"{who} {used / window_s:.0%}" for used, who in sorted(busy, reverse=True) if used > threshold]


def machine_note(own: Sequence[int]) -> str:
    """The load average and any other busy process, for a report to print before it measures."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    busy = busy_others(own)
    others = f"busy other processes: {', '.join(busy)} (the machine is NOT idle)" if busy else "none busy"
    return f"{os.cpu_count()} CPUs, load average {load}; {others}"


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending sequence."""
    return sorted_values[max(0, math.ceil(fraction * len(sorted_values)) - 1)]


def per_op(seconds: float, count: int, unit: float = 1000.0) -> float:
    """CPU ``seconds`` per operation, in ms (``unit`` 1e6: in µs); 0 when nothing was counted."""
    return seconds * unit / count if count else 0.0
