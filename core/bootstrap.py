"""build_core(settings): the only place that picks concrete adapters."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence

from pydantic import SecretStr

from core.adapters.fanout.base import Fanout
from core.adapters.fanout.memory import MemoryFanout
from core.adapters.limits.base import RateLimiter
from core.adapters.limits.memory import MemoryRateLimiter
from core.adapters.outbound.client import OutboundClient
from core.adapters.outbound.reach import callback_reach, web_push_reach
from core.adapters.outbound.resolver import Resolver, SystemResolver
from core.adapters.push.base import WEB_PUSH, PushSender
from core.adapters.push.router import PushRouter
from core.adapters.storage.base import ObjectStore
from core.adapters.storage.local import LocalObjectStore
from core.adapters.webhooks.poster import USER_AGENT as CALLBACKS_USER_AGENT
from core.adapters.webhooks.poster import WebhookPoster
from core.clock import Clock, SystemClock
from core.principal import Principal
from core.runtime.core import Core
from core.server_keys import ServerKeys, load_server_keys
from core.services.push_registration import forget_push_registration
from core.settings import Settings
from core.startup import StartupError, readable_file
from core.store.database import is_sqlite, make_engine
from core.store.deadline import bound_connections
from core.store.schema_version import upgrade_unless_newer
from core.store.shared_secrets import KeepOnce, keep_once

log = logging.getLogger("relaybox.core")

NEWER_SCHEMA = (
    "the database schema (%s) is newer than this release's migrations: running on it unchanged "
    "(a rollback, or a rolling upgrade in progress)"
)
CALLBACK_TIMEOUT_S = 10.0  # one answer callback attempt, resolving included

# Builds one push sender from the settings, or None when its service is not configured.
SenderFactory = Callable[[Settings], PushSender | None]


def build_core(
    settings: Settings,
    *,
    clock: Clock | None = None,
    senders: Sequence[SenderFactory] | None = None,
    resolver: Resolver | None = None,
) -> Core:
    """Assemble a Core for ``settings``; migrates the database when ``migrate_on_start`` is set.
    ``senders``: the push senders' factories, ``PUSH_SENDERS`` unless given; ``resolver``: how
    answer callbacks resolve their hosts, the system's resolver unless given (web push and client
    metadata documents always ask the system's)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = make_engine(settings.effective_database_url)
    if settings.migrate_on_start:  # before the deadline: a migration may rightly take longer
        newer = upgrade_unless_newer(engine)
        if newer is not None:
            log.warning(NEWER_SCHEMA, newer)
    if not is_sqlite(settings.effective_database_url):
        bound_connections(engine, settings.database_timeout_s)
    keys = load_server_keys(settings)
    try:
        settings = _with_shared_vapid_key(settings, functools.partial(keep_once, engine), keys)
        push = _push(settings, PUSH_SENDERS if senders is None else senders)
    except BaseException:
        engine.dispose()  # a refused start (StartupError) leaves no connection open behind it
        raise
    limiter = _limiter(settings)
    core = Core(
        settings=settings,
        engine=engine,
        clock=clock or SystemClock(),
        keys=keys,
        limiter=limiter,
        fanout=_fanout(settings, limiter),
        push=push,
        objects=_objects(settings, keys),
        webhooks=WebhookPoster(
            OutboundClient(
                resolver or SystemResolver(),
                callback_reach(settings),
                timeout_s=CALLBACK_TIMEOUT_S,
                user_agent=CALLBACKS_USER_AGENT,
            )
        ),
    )

    async def forget_registration(device_id: str, service: str) -> None:
        await core.run(forget_push_registration, Principal.system(), device_id=device_id, service=service)

    push.on_unregistered = forget_registration
    if settings.redis_url:
        from core.adapters.fanout.redis import RedisFanout

        if isinstance(core.fanout, RedisFanout):
            core.readiness_probes["redis"] = core.fanout.ping  # /readyz
    return core


def _limiter(settings: Settings) -> RateLimiter:
    if not settings.redis_url:
        return MemoryRateLimiter()
    from core.adapters.limits.redis import RedisRateLimiter  # imported only when configured: an extra

    return RedisRateLimiter(settings.redis_url, namespace=settings.redis_namespace)


def _fanout(settings: Settings, limiter: RateLimiter) -> Fanout:
    if not settings.redis_url:
        return MemoryFanout()
    from core.adapters.fanout.redis import RedisFanout
    from core.adapters.limits.redis import RedisRateLimiter

    # One Redis, one breaker: once the limiter has seen it down, the fan-out fails fast too.
    breaker = limiter.breaker if isinstance(limiter, RedisRateLimiter) else None
    return RedisFanout(settings.redis_url, namespace=settings.redis_namespace, breaker=breaker)


def _push(settings: Settings, factories: Sequence[SenderFactory]) -> PushRouter:
    """The configured push senders, in the factories' order (also the order of preference)."""
    senders = [sender for sender in (make(settings) for make in factories) if sender is not None]
    return PushRouter(senders, web_push_key=_web_push_key(senders))


def _fcm(settings: Settings) -> PushSender | None:
    if settings.fcm_credentials_file is None:
        return None
    from core.adapters.push.fcm import FcmPush  # imported only when configured: an optional extra

    path = readable_file("RELAYBOX_FCM_CREDENTIALS_FILE", settings.fcm_credentials_file)
    try:
        return FcmPush(path, fcm_url=settings.fcm_url, timeout_s=settings.push_timeout_s)
    except ValueError:  # firebase-admin: not JSON, or not a service account's
        raise StartupError(
            f"RELAYBOX_FCM_CREDENTIALS_FILE={path}: not a Firebase service-account JSON file"
        ) from None


def _webpush(settings: Settings) -> PushSender | None:
    """Web push, signed with the configured VAPID key or one generated on first run; off only
    without the ``webpush`` extra (pywebpush) or with ``web_push_enabled`` false."""
    if not settings.web_push_enabled:
        return None
    try:
        from core.adapters.push.webpush import WebPushSender
    except ImportError:
        log.info("web push is off: install relaybox[webpush] for browsers' push notifications")
        return None
    from core.adapters.push.vapid_key import vapid_private_key

    key = vapid_private_key(settings)
    try:
        return WebPushSender(key, settings.vapid_subject, outbound=web_push_outbound(settings))
    except ValueError as error:  # the key or the subject, named in its one line
        raise StartupError(str(error)) from None


def _with_shared_vapid_key(settings: Settings, keep: KeepOnce, keys: ServerKeys) -> Settings:
    """On PostgreSQL, with web push on and no ``vapid_private_key`` configured, the settings with the
    VAPID key every replica shares, kept in the database (``vapid_key.shared_vapid_private_key``).
    Sealing it there takes a server key every replica holds, which ``relaybox serve`` requires on
    PostgreSQL; a server built without one (tests building a Core) keeps its data folder's key."""
    if (
        is_sqlite(settings.effective_database_url)
        or not settings.web_push_enabled
        or settings.vapid_private_key is not None
        or settings.server_secret_key is None
    ):
        return settings
    from core.adapters.push.vapid_key import shared_vapid_private_key

    key = shared_vapid_private_key(settings, keys, keep)
    return settings.model_copy(update={"vapid_private_key": SecretStr(key)})


def web_push_outbound(settings: Settings, resolver: Resolver | None = None) -> OutboundClient:
    """How web push reaches endpoints: the push services' hosts only (``web_push_reach``), each
    push within ``push_timeout_s``, connections kept for the next push."""
    from core.adapters.push.webpush import USER_AGENT

    return OutboundClient(
        resolver or SystemResolver(),
        web_push_reach(settings),
        timeout_s=settings.push_timeout_s,
        user_agent=USER_AGENT,
        keep_alive=True,
    )


def _web_push_key(senders: Sequence[PushSender]) -> str | None:
    """The VAPID public key browsers subscribe with (``WebPushSender.application_server_key``),
    when web push is one of ``senders``; an in-memory stand-in has none."""
    web_push = next((sender for sender in senders if sender.name == WEB_PUSH), None)
    key = getattr(web_push, "application_server_key", None)
    return key if isinstance(key, str) else None


# The push senders, in order of preference: a device registered with more than one push service
# is pushed through the earliest (FCM before web push). A new push service is one more entry: its
# sender module, or a factory here when it needs settings or an optional extra.
PUSH_SENDERS: tuple[SenderFactory, ...] = (_fcm, _webpush)


def _objects(settings: Settings, keys: ServerKeys) -> ObjectStore:
    """The S3-compatible bucket when one is configured, else the embedded store in a local folder."""
    if settings.s3_bucket:
        from core.adapters.storage.s3 import S3ObjectStore  # imported only when configured: an extra

        return S3ObjectStore.from_settings(settings)
    folder = settings.effective_file_store_dir
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return LocalObjectStore(folder, keys.derived_key("object-urls"), settings.base_url)
