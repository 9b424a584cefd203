"""Prometheus metrics at ``/metrics``, on a registry of the app's own (tests build many apps).

- ``relaybox_requests_total{route,method,status}`` and ``relaybox_request_seconds{route,method}``:
  ``route`` is the route template (``/v1/send/{token}``), never the requested path, which may
  hold a token; a request that matched no route is ``unmatched``. A stream's or long poll's
  duration is its whole response. Every response is counted on plain numbers (``Requests``) and
  exposed as a counter and a histogram at scrape time, sample for sample as prometheus_client's
  ``Counter`` and ``Histogram`` would be: their updates (a lock and several calls each) cost more
  than the rest of the request's bookkeeping.
- ``relaybox_pushes_total{outcome}``: pushes handed to the push router, by outcome.
- ``relaybox_group_rewrites_total``: group-commit transactions rolled back and written again in
  savepoints, because a write failed after changing rows (``core.runtime.group_transaction``).
- ``relaybox_open_streams``, ``relaybox_waiting_polls``: on this process, now.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client import metrics as prometheus_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import Scope

from core.runtime.core import Core

METRICS_PATH = "/metrics"
UNMATCHED = "unmatched"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
BUCKETS = Histogram.DEFAULT_BUCKETS  # upper bounds, the last +Inf
_BUCKET_LABELS = tuple(floatToGoString(bound) for bound in BUCKETS)  # type: ignore[no-untyped-call]


class CoreCollector(Collector):
    """Read from the Core at scrape time: push outcomes, group rewrites, open streams, waiting polls."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def collect(self) -> Iterable[Metric]:
        pushes = CounterMetricFamily(
            "relaybox_pushes", "Pushes handed to the push router, by outcome", labels=["outcome"]
        )
        for outcome, count in sorted(self.core.push.outcomes.items()):
            pushes.add_metric([outcome], count)
        yield pushes
        yield CounterMetricFamily(
            "relaybox_group_rewrites",
            "Group-commit transactions written again in savepoints (a write failed after changing rows)",
            value=self.core.group_rewrites.count,
        )
        yield GaugeMetricFamily(
            "relaybox_open_streams",
            "Open /v1/sync streams on this process",
            value=self.core.presence.open_streams,
        )
        yield GaugeMetricFamily(
            "relaybox_waiting_polls",
            "Long polls waiting for an answer on this process",
            value=self.core.waits.long_polls,
        )


class _Series:
    """One label set's numbers: a count's ``value``, or a duration's ``sum`` and observations in
    each bucket (not cumulative: the exposition adds them up)."""

    __slots__ = ("buckets", "created", "sum", "value")

    def __init__(self, timing: bool) -> None:
        self.value = 0
        self.sum = 0.0
        self.buckets = [0] * len(BUCKETS) if timing else []
        self.created = time.time()


class Requests(Collector):
    """``relaybox_requests`` (a counter) and ``relaybox_request_seconds`` (a histogram of the
    default buckets), counted on the event loop and read at scrape time, also on the loop."""

    def __init__(self) -> None:
        # Both series of a response, by route template, known method and status: a small set.
        self._series: dict[tuple[str, str, int], tuple[_Series, _Series]] = {}
        self._timings: dict[tuple[str, str], _Series] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method if method in METHODS else "other", status)
        series = self._series.get(key)
        if series is None:
            timing = self._timings.get(key[:2])
            if timing is None:
                timing = self._timings[key[:2]] = _Series(timing=True)
            series = self._series[key] = (_Series(timing=False), timing)
        count, timing = series
        count.value += 1
        timing.sum += seconds
        timing.buckets[bisect_left(BUCKETS, seconds)] += 1

    def collect(self) -> Iterable[Metric]:
        created = prometheus_metrics._use_created  # as its own metrics do (``disable_created_metrics``)
        requests = Metric(
            "relaybox_requests", "HTTP requests by route template, method and status", "counter"
        )
        for (route, method, status), (count, _) in list(self._series.items()):
            labels = {"route": route, "method": method, "status": str(status)}
            requests.add_sample("relaybox_requests_total", labels, float(count.value))
            if created:
                requests.add_sample("relaybox_requests_created", labels, count.created)
        yield requests
        seconds = Metric(
            "relaybox_request_seconds",
            "Time to the end of the response, by route template and method",
            "histogram",
        )
        for (route, method), timing in list(self._timings.items()):
            labels = {"route": route, "method": method}
            total = 0.0
            for le, observed in zip(_BUCKET_LABELS, timing.buckets, strict=True):
                total += observed
                seconds.add_sample("relaybox_request_seconds_bucket", labels | {"le": le}, total)
            seconds.add_sample("relaybox_request_seconds_count", labels, total)
            seconds.add_sample("relaybox_request_seconds_sum", labels, timing.sum)
            if created:
                seconds.add_sample("relaybox_request_seconds_created", labels, timing.created)
        yield seconds


class Metrics:
    observe: Callable[[str, str, int, float], None]  # a response: route template, method, status, seconds

    def __init__(self, core: Core) -> None:
        self.registry = CollectorRegistry()
        self.requests = Requests()
        self.registry.register(self.requests)
        self.registry.register(CoreCollector(core))
        self.observe = self.requests.observe  # no call of its own in between: every response pays it

    def route(self) -> Route:
        async def metrics(_request: Request) -> Response:
            return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

        return Route(METRICS_PATH, metrics, methods=["GET"], include_in_schema=False)


def template(scope: Scope, root: str) -> str:
    """The matched route's path template with the prefixes of the mounts it is in, from what the
    router wrote into the scope (``route`` and ``root_path``; mount prefixes here are fixed)."""
    route: BaseRoute | None = scope.get("route")
    prefix = str(scope.get("root_path", ""))[len(root) :]
    if isinstance(route, Route):
        return prefix + route.path
    if isinstance(route, Mount) and not route.routes:  # a mounted app: its own paths are its business
        return prefix
    return UNMATCHED  # nothing matched, or nothing inside a mount of routes did
