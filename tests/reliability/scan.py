"""Where a server run leaves bytes behind, and whether any of them holds a marker in plaintext.

Sources: the SQLite database file with its WAL and shared-memory files, the embedded object
store's files, a ``pg_dump`` of the PostgreSQL database, every Redis key and value (pub/sub
messages are transient: Redis keeps none), and the server's log output. Each source is named, so
a finding says where the marker was.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

import redis

from tests.services import unavailable

Sources = dict[str, bytes]


def sqlite_files(data_dir: Path) -> Sources:
    """The database file and its ``-wal``/``-shm`` companions, as they are on disk."""
    found = {f"sqlite:{path.name}": path.read_bytes() for path in sorted(data_dir.glob("*.db*"))}
    assert found, f"no SQLite files in {data_dir}"
    return found


def object_store_files(store_dir: Path) -> Sources:
    """Every object the embedded file store still holds (chunks of unfinished transfers)."""
    if not store_dir.exists():
        return {}
    return {
        f"object store:{path.relative_to(store_dir)}": path.read_bytes()
        for path in sorted(store_dir.rglob("*"))
        if path.is_file()
    }


def postgres_dump(url: str) -> Sources:
    """The whole database as ``pg_dump`` writes it (schema and every row)."""
    binary = shutil.which("pg_dump")
    if binary is None:
        unavailable("pg_dump", FileNotFoundError("pg_dump is not on PATH"))
    done = subprocess.run(
        [str(binary), "--no-owner", "--dbname", url], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return {"postgres:pg_dump": done.stdout}


def redis_contents(client: redis.Redis) -> Sources:
    """Every key with its value, whatever its type (a private instance: all of it is ours)."""
    lines: list[bytes] = []
    for key in client.scan_iter(count=500):
        raw_kind = client.type(key)
        kind = raw_kind.decode() if isinstance(raw_kind, bytes) else str(raw_kind)
        if kind == "string":
            values: Iterable[object] = [client.get(key)]
        elif kind == "zset":
            values = client.zrange(key, 0, -1, withscores=True)
        elif kind == "hash":
            values = client.hgetall(key).items()
        elif kind == "list":
            values = client.lrange(key, 0, -1)
        elif kind == "set":
            values = client.smembers(key)
        else:
            values = [client.dump(key)]
        lines.append(key + b" " + repr(list(values)).encode())
    return {"redis": b"\n".join(lines)}


def markers_found(sources: Mapping[str, bytes], markers: Iterable[str]) -> list[tuple[str, str]]:
    """Every (marker, source) pair where the marker's UTF-8 bytes occur in the source."""
    return [
        (marker, name)
        for marker in markers
        for name, content in sources.items()
        if marker.encode() in content
    ]
