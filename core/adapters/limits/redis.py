"""Rate limiter on Redis, shared by every replica: one sorted set per bucket, one script per call.

Each bucket (``LimitCheck.bucket``) is a sorted set of charges scored by their time, so rolling
windows stay exact sliding logs and a calendar month is a key of its own. One Lua script trims,
counts and — only when every layer allows it — charges all layers of a call, atomically and in a
single round trip; it answers each layer's count and oldest score, from which Python computes
the same states and decision as the memory limiter (``layer_state``, ``decide``).

A send makes one call (its charge) or two (the IP peek first, when its credential is not
cached), so a call goes straight to a connection of the limiter's own: ``EVALSHA`` written and its
answer read on it. Through redis-py's client and pool it cost twice the client CPU (28 µs against
14), which adds nothing here: one command, no retry policy to apply beyond the one below. The
sends of a group are charged together (``acquire_each``): their scripts pipelined, one round trip
for all, where each round trip costs this machine ~60 µs of the caller's CPU and ~25 of Redis's.
"""

from __future__ import annotations

import math
import re
import secrets
import threading
from typing import Any

import redis

from core.adapters.limits.base import (
    LimitCheck,
    LimitDecision,
    WindowKind,
    decide,
    layer_state,
)
from core.availability import CircuitBreaker, DependencyUnavailableError

DEFAULT_NAMESPACE = "relaybox"
TIMEOUT_S = 2.0

# KEYS: a sorted set per layer.  ARGV: now, cost, charge (1 | 0), a member id unique to this call,
# then per layer: the earliest time still counted, the key's time to live in ms, the limit, and
# "r" for a rolling window or "c" for a calendar month. Every ``redis.call`` in a script costs
# about as much again as the command itself, so a layer makes only the calls it needs: a month's
# key holds that month's charges alone (the month is in its name), so it is never trimmed and its
# oldest charge is never asked for (a month resets when the next begins); it gets its time to live
# (until the month ends) once, when its first charge creates it. A rolling window's key gets the
# window's length from now on every charge, never shorter than the one set before it.
_SCRIPT = """
local cost = tonumber(ARGV[2])
local allowed = true
local answer = {}
for i, key in ipairs(KEYS) do
  local at = 4 + (i - 1) * 4
  local rolling = ARGV[at + 4] == 'r'
  if rolling then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[at + 1])
  end
  local used = redis.call('ZCARD', key)
  local oldest = false
  if rolling and used > 0 then
    oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2]
  end
  if used + cost > tonumber(ARGV[at + 3]) then
    allowed = false
  end
  answer[i] = {used, oldest}
end
if allowed and ARGV[3] == '1' then
  for i, key in ipairs(KEYS) do
    local at = 4 + (i - 1) * 4
    local members = {}
    for n = 1, cost do
      members[#members + 1] = ARGV[1]
      members[#members + 1] = ARGV[4] .. ':' .. i .. ':' .. n
      if #members >= 256 or n == cost then  -- unpack has a stack limit
        redis.call('ZADD', key, unpack(members))
        members = {}
      end
    end
    if ARGV[at + 4] == 'r' or answer[i][1] == 0 then
      redis.call('PEXPIRE', key, ARGV[at + 2])
    end
  end
end
return answer
"""
_KIND = {WindowKind.ROLLING: "r", WindowKind.CALENDAR_MONTH: "c"}  # a layer's last argument
_Script = tuple[list[str], list[str | int]]  # one call's keys and arguments
_NOT_RUN = object()  # in place of the answer of a script the server did not have


class RedisRateLimiter:
    """Synchronous (the core calls it from worker threads); redis-py's client pools connections."""

    blocking = True  # a round trip to Redis per call

    def __init__(
        self, url: str, *, namespace: str = DEFAULT_NAMESPACE, breaker: CircuitBreaker | None = None
    ) -> None:
        self.breaker = breaker or CircuitBreaker("redis")  # shared with the fan-out by bootstrap
        # Query-string options in ``url`` win over these defaults.
        self._client = redis.Redis.from_url(url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S)
        self._prefix = f"{namespace}:limit:"
        self._sha = self._client.register_script(_SCRIPT).sha  # the script's SHA1 digest
        # Connections between calls, one per concurrent caller (redis-py's ``Connection``: untyped).
        self._idle: list[Any] = []
        self._lock = threading.Lock()

    def acquire(self, checks: list[LimitCheck], now: float, *, cost: int = 1) -> LimitDecision:
        [decision] = self._evaluate([checks], now, cost, charge=True)
        return decision

    def acquire_each(self, calls: list[list[LimitCheck]], now: float) -> list[LimitDecision]:
        return self._evaluate(calls, now, 1, charge=True) if calls else []

    def peek(self, checks: list[LimitCheck], now: float) -> LimitDecision:
        [decision] = self._evaluate([checks], now, 1, charge=False)
        return decision

    def reset(self) -> None:
        """Forget every count under this limiter's namespace (and nothing else in the database)."""
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", self._prefix) + "*"
        batch: list[bytes] = []
        for key in self._client.scan_iter(match=pattern, count=500):
            batch.append(key)
            if len(batch) >= 500:
                self._client.unlink(*batch)
                batch.clear()
        if batch:
            self._client.unlink(*batch)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.disconnect()  # a later call connects it again
        self._client.close()

    def _evaluate(
        self, calls: list[list[LimitCheck]], now: float, cost: int, *, charge: bool
    ) -> list[LimitDecision]:
        """Each call's script, all in one round trip (Redis runs them in their order)."""
        scripts = [self._script_arguments(checks, now, cost, charge) for checks in calls]
        self.breaker.check()
        try:
            answers = self._run(scripts)
        except (redis.ConnectionError, redis.TimeoutError) as error:
            self.breaker.failed()
            raise DependencyUnavailableError("redis") from error
        self.breaker.succeeded()
        return [
            decide(
                [
                    layer_state(
                        check,
                        now,
                        used=int(used),
                        oldest=None if oldest is None else float(oldest),
                        cost=cost,
                        charge=charge,
                    )
                    for check, (used, oldest) in zip(checks, answer, strict=True)
                ],
                now,
            )
            for checks, answer in zip(calls, answers, strict=True)
        ]

    def _script_arguments(self, checks: list[LimitCheck], now: float, cost: int, charge: bool) -> _Script:
        keys: list[str] = []
        args: list[str | int] = [repr(now), cost, 1 if charge else 0, secrets.token_hex(8)]
        for check in checks:
            key, since, expires = check.bucket(now)
            keys.append(self._prefix + key)
            time_to_live = max(1, math.ceil((expires - now) * 1000))
            args.extend([repr(since), time_to_live, check.limit, _KIND[check.kind]])
        return keys, args

    def _run(self, scripts: list[_Script]) -> list[Any]:
        """The scripts on a connection of this limiter's: a connection that dropped while idle
        (Redis restarted) is tried once more, connected afresh; a timeout is not (it is the bound)."""
        with self._lock:
            connection = self._idle.pop() if self._idle else self._client.connection_pool.make_connection()
        try:
            try:
                return self._call(connection, scripts)
            except redis.ConnectionError:
                connection.disconnect()
                return self._call(connection, scripts)
        except BaseException:
            connection.disconnect()  # nothing half-read is left on it
            raise
        finally:
            with self._lock:
                self._idle.append(connection)

    def _call(self, connection: Any, scripts: list[_Script]) -> list[Any]:
        """Every script's answer. A new or flushed server answers NOSCRIPT: each script it did not
        run is sent again with its text (which caches it), after the others, as a rare exception to
        their order (a server flushed between two scripts of one round trip)."""
        commands = [("EVALSHA", self._sha, len(keys), *keys, *args) for keys, args in scripts]
        connection.send_packed_command(connection.pack_commands(commands))
        answers: list[Any] = []
        for _ in commands:  # every answer is read, so that none is left on the connection
            try:
                answers.append(connection.read_response())
            except redis.exceptions.NoScriptError:
                answers.append(_NOT_RUN)
        for index, (keys, args) in enumerate(scripts):
            if answers[index] is _NOT_RUN:
                connection.send_command("EVAL", _SCRIPT, len(keys), *keys, *args)
                answers[index] = connection.read_response()
        return answers
