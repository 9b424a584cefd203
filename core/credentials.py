"""The verified-credential cache: what a bearer credential stood for when the store last said so,
kept in process for a short while so that a hot caller is not one database read per request.

Every kind of bearer credential goes through ``CredentialCache.cached``: sender tokens and device
credentials (``core.services.auth``) and the connector's OAuth access tokens (``oauth.tokens``).
Nothing else keeps a verification: the connector asks ``oauth.tokens.verify_access_token`` on
every call.

Entries are keyed by the credential's SHA-256 digest (never the credential) and tagged with what
can end them (``grant:<id>``, ``device:<id>``, ``otk:<token id>``…). Revocation is immediate:

- the replica that commits a revocation drops the tags before it answers (``Core`` does it after
  the commit, from the ``CredentialsRevoked`` / ``DeviceRevoked`` event), and publishes them on
  ``CREDENTIALS_TOPIC`` so every other replica drops them when the fan-out brings them;
- a read that started before a revocation cannot put back what it saw (``epoch``: any drop
  invalidates every read in flight);
- the cache serves only while its fan-out subscription is confirmed and nothing was lost on it:
  after an overflow or a lost connection it is emptied and bypassed until the fan-out resyncs.

An entry also lives at most ``ttl_s`` seconds and never past the credential's own expiry; the
TTL bounds how stale a replica can be only when a revocation's publish itself fails (a lost
fan-out connection is noticed and empties the cache).
"""

from __future__ import annotations

import hmac
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

import anyio

from core.adapters.fanout.base import Fanout, Subscription
from core.clock import Clock
from core.domain.secrets import digest
from core.runtime.events import Deferred

log = logging.getLogger("relaybox.credentials")

CREDENTIALS_TOPIC = "credentials"
DEFAULT_TTL_S = 30.0
DEFAULT_MAX_ENTRIES = 10_000
USE_GRANULARITY_S = 60  # last-use bookkeeping, as the store notes it: at most once a minute
RESUBSCRIBE_S = (0.1, 5.0)  # back-off of the listener after its subscription failed: first, max

T = TypeVar("T")


def grant_tag(grant_id: str) -> str:
    return f"grant:{grant_id}"


def device_tag(device_id: str) -> str:
    return f"device:{device_id}"


def access_token_tag(token_id: str) -> str:
    return f"otk:{token_id}"


def sender_token_tag(token_id: str) -> str:
    return f"tok:{token_id}"


def use_due(last: int | None, now: int) -> bool:
    """Whether a credential's last use (noted at ``last``) is worth writing again at ``now``."""
    return last is None or now - last >= USE_GRANULARITY_S


@dataclass(frozen=True, slots=True)
class Verification(Generic[T]):
    """What the store said a credential stands for (``value``), and how long that may be kept: the
    tags that end it, the credential's own expiry, and its last-use bookkeeping. No tags: the value
    is answered but not kept (a device still pairing)."""

    value: T
    tags: tuple[str, ...] = ()
    expires_at: float | None = None
    note_use: Callable[[int], Deferred] | None = None  # writes the last use, at the time given
    used_at: int | None = None  # the last use as the store notes it (or is about to)


def _anything(_value: object) -> bool:
    return True


@dataclass(slots=True)
class _Entry:
    digest: str  # the credential's digest, compared again on a hit as the store's row is
    value: object
    tags: tuple[str, ...]  # one or two: a tuple is a fraction of a frozenset's size
    until: float
    note_use: Callable[[int], Deferred] | None
    used_at: int | None


class CredentialCache:
    """Bounded (least recently used goes first), short-lived, dropped by tag. Used from the event
    loop's thread only (lookups, puts after the read returned, drops after a commit)."""

    def __init__(
        self, clock: Clock, *, ttl_s: float = DEFAULT_TTL_S, max_entries: int = DEFAULT_MAX_ENTRIES
    ) -> None:
        self._clock = clock
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._subscription: Subscription | None = None
        self.epoch = 0  # advanced by every drop: a read that saw an older one may not put

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def live(self) -> bool:
        """Serving: subscribed to revocations and nothing was lost since."""
        sub = self._subscription
        return sub is not None and sub.connected and not sub.overflowed

    async def cached(
        self,
        kind: type[T],
        credential: str,
        verify: Callable[[], Awaitable[Verification[T] | None]],
        *,
        defer: Callable[[Deferred], None],
        accept: Callable[[T], bool] = _anything,
    ) -> T | None:
        """What ``credential`` stands for: a ``kind`` verified a moment ago (and ``accept``-ed) from
        the cache, its last use handed to ``defer`` when due; else ``verify`` asks the store, once
        for this call (calls missing at the same time each ask), and what it answers is kept
        unless a revocation came meanwhile. ``None`` when ``verify`` says the credential is not
        valid (never kept); its errors propagate."""
        key = digest(credential)
        hit = self._hit(key, kind, accept)
        if hit is not None:
            value, note = hit
            if note is not None:
                defer(note)
            return value
        epoch = self.epoch
        found = await verify()
        if found is None:
            return None
        if found.tags:
            self.put(
                key,
                found.value,
                epoch=epoch,
                tags=found.tags,
                expires_at=found.expires_at,
                note_use=found.note_use,
                used_at=found.used_at,
            )
        return found.value

    def get(self, key: str) -> tuple[object, Deferred | None] | None:
        """The cached value for a credential digest and, when its last use is due to be written,
        the bookkeeping to run; ``None`` when not cached (or the cache is not serving). A part of
        ``cached``, and what tests look at."""
        return self._hit(key, object, _anything)

    def _hit(self, key: str, kind: type[T], accept: Callable[[T], bool]) -> tuple[T, Deferred | None] | None:
        if not self.live:
            return None
        entry = self._entries.get(key)
        if entry is None or not hmac.compare_digest(entry.digest, key):
            return None
        now = self._clock.now()
        if now >= entry.until:
            del self._entries[key]
            return None
        value = entry.value
        if not isinstance(value, kind) or not accept(value):
            return None  # another kind of credential than the caller takes: the store answers
        self._entries.move_to_end(key)
        note = None
        if entry.note_use is not None and use_due(entry.used_at, int(now)):
            entry.used_at = int(now)
            note = entry.note_use(int(now))
        return value, note

    def put(
        self,
        key: str,
        value: object,
        *,
        epoch: int,
        tags: Iterable[str],
        expires_at: float | None = None,
        note_use: Callable[[int], Deferred] | None = None,
        used_at: int | None = None,
    ) -> None:
        """Cache what the store said about a credential (by its digest), read when the epoch was
        ``epoch``: nothing is kept if a drop happened since (the read may predate a revocation).
        A part of ``cached``."""
        if epoch != self.epoch or not self.live:
            return
        until = self._clock.now() + self._ttl_s
        if expires_at is not None:
            until = min(until, expires_at)
        self._entries[key] = _Entry(key, value, tuple(tags), until, note_use, used_at)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def drop(self, tags: Iterable[str]) -> None:
        """Forget every entry carrying one of ``tags``."""
        wanted = frozenset(tags)
        self.epoch += 1
        for key in [key for key, entry in self._entries.items() if not wanted.isdisjoint(entry.tags)]:
            del self._entries[key]

    def clear(self) -> None:
        self.epoch += 1
        self._entries.clear()

    # -- across replicas ------------------------------------------------------------------
    async def follow(self, fanout: Fanout) -> None:
        """Listen for revocations published by any replica (this one included) for as long as the
        Core runs; the cache serves only while this is subscribed."""
        delay = RESUBSCRIBE_S[0]
        while True:
            try:
                async with fanout.subscribe(CREDENTIALS_TOPIC) as subscription:
                    self.clear()
                    self._subscription = subscription
                    delay = RESUBSCRIBE_S[0]
                    while True:
                        _topic, message = await subscription.receive()
                        self._hear(subscription, message)
            except Exception as error:  # a fan-out outage: bypass the cache until subscribed again
                log.warning("credential cache unsubscribed: %s: %s", type(error).__name__, error)
            finally:
                self._subscription = None
                self.clear()
            await anyio.sleep(delay)
            delay = min(RESUBSCRIBE_S[1], delay * 2)

    def _hear(self, subscription: Subscription, message: str) -> None:
        if subscription.overflowed:  # something was lost: forget everything
            self.clear()
            if subscription.connected:
                subscription.overflowed = False
            return
        try:
            tags = json.loads(message).get("drop", [])
        except (ValueError, AttributeError):
            tags = None
        if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
            self.clear()  # not ours to understand: be safe
            return
        if tags:
            self.drop(tags)


def revocation_message(tags: Iterable[str]) -> str:
    return json.dumps({"drop": sorted(tags)})
