"""spike: a burst then a low rate, met three ways; drain time, executor-seconds and scale
events of each (`--only spike`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer
from kubernetes import client

from bench.apps import benches, observing, reports, settings, spikeways, tasktimelines
from rillet.kafka.lag import LagReader
from rillet.reconcile import scalingreplays


@dataclass(frozen=True)
class Sample:
    at: float  # seconds since the burst began
    running: int
    lag: int | None
    requested: int | None = None  # the executor count the autoscaler asks for (None: unread)


@dataclass(frozen=True)
class SpikeResult:
    way: str
    drain: float | None
    executor_seconds: float
    scale_events: int
    scale_moves: int
    series: tuple[int, ...]
    requests: int  # changes of the count asked for: the autoscaler's own scale events


def spike(b: benches.Bench, namespace: str, reader: LagReader) -> list[SpikeResult]:
    results = []
    ways: list[tuple[Callable[[], spikeways.Way], int]] = [
        (lambda: spikeways.operated_way(b, namespace, "Rillet lag scaling", "sp-rillet", 1), 1),
        (lambda: spikeways.dynamic_allocation_way(b, b.namespace("dynalloc"), "sp-dynalloc"), 1),
        (
            lambda: spikeways.operated_way(
                b, namespace, f"fixed at {settings.CAP}", "sp-fixed", settings.CAP
            ),
            settings.CAP,
        ),
    ]
    for setup, initial in ways:
        way = setup()
        print(f"  spike, {way.label} ...", flush=True)
        result = run_spike(b, way, reader, initial)
        print(
            f"  spike, {way.label}: drain {reports.fmt(result.drain)} s, executor-seconds "
            f"{result.executor_seconds:.0f}, scale events {result.scale_events} (moves "
            f"{result.scale_moves}), executors "
            f"{describe_series(result.series)}",
            flush=True,
        )
        results.append(result)
        if way.namespace == namespace:
            observing.delete_app(b, namespace, way.app)
        else:
            b.drop_namespace(way.namespace)
    return results


def run_spike(b: benches.Bench, way: spikeways.Way, reader: LagReader, initial: int) -> SpikeResult:
    """Warm the App up, then the burst and the low rate; sample executors and lag each second."""
    warm_up(b, way, reader, initial)
    samples: list[Sample] = []
    stop = threading.Event()
    started, started_wall = time.monotonic(), time.time()
    sampler = threading.Thread(
        target=sample_spike, args=(b, way, started, samples, stop), daemon=True
    )
    sampler.start()
    try:
        observing.produce(
            b.bootstrap, way.source, settings.SPIKE_RECORDS, tag="burst", partitions=settings.CAP
        )
        burst_done = time.monotonic() - started
        low_rate(b, way, started, samples, burst_done)
    finally:
        stop.set()
        sampler.join(timeout=30)
    drained = next(
        (
            s.at
            for s in samples
            if s.at >= burst_done and s.lag is not None and s.lag <= settings.DRAINED_LAG
        ),
        None,
    )
    if way.unwatched:
        spikeways.check_unwatched(b, way)
    dump = b.logs / f"spike-{way.app}.json"  # the samples, to look into a figure
    dump.write_text(json.dumps([dataclasses.asdict(s) for s in samples]))
    tasktimelines.print_task_timeline(b, way, started_wall, drained)
    inside = [s for s in samples if s.at <= settings.SPIKE_WINDOW]
    series = tuple(s.running for s in inside)
    return SpikeResult(
        way=way.label,
        drain=drained,
        executor_seconds=executor_seconds(inside, settings.SPIKE_WINDOW),
        scale_events=scalingreplays.count_scale_events(series),
        scale_moves=count_moves(inside),
        series=series,
        requests=scalingreplays.count_scale_events(
            s.requested for s in inside if s.requested is not None
        ),
    )


def warm_up(b: benches.Bench, way: spikeways.Way, reader: LagReader, initial: int) -> None:
    """The driver and `initial` executors Running, the warm-up records committed, and the
    executors back to `initial`."""
    ns, app = way.namespace, way.app
    benches.wait_for(
        lambda: (
            observing.running(b.core, ns, app, "driver") == 1
            and observing.running(b.core, ns, app) == initial
        ),
        timeout=300,
        what=f"{way.label}: the driver and {initial} executors Running",
    )
    observing.produce(
        b.bootstrap, way.source, settings.WARMUP_RECORDS, tag="warm-up", partitions=settings.CAP
    )
    benches.wait_for(
        lambda: observing.group_lag(reader, ns, app, way.source) == 0,
        timeout=300,
        what=f"{way.label}: the warm-up records processed and committed",
    )
    # The burst meets each way at rest: the warm-up's first batch (JIT, code generation) may
    # have made dynamic allocation add executors, idle since; Spark removes them after its
    # executorIdleTimeout (60 s).
    benches.wait_for(
        lambda: observing.running(b.core, ns, app) == initial,
        timeout=300,
        what=f"{way.label}: back to {initial} executors after the warm-up",
    )


def low_rate(
    b: benches.Bench, way: spikeways.Way, started: float, samples: list[Sample], burst_done: float
) -> None:
    """LOW_RATE records/s until the window ended and the burst drained (or DRAIN_TIMEOUT)."""
    producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    sent = 0
    while True:
        now = time.monotonic() - started
        drained = any(
            s.at >= burst_done and s.lag is not None and s.lag <= settings.DRAINED_LAG
            for s in list(samples)
        )
        if (now >= settings.SPIKE_WINDOW and drained) or now >= settings.DRAIN_TIMEOUT:
            break
        due = int((now - burst_done) * settings.LOW_RATE) if now > burst_done else 0
        while sent < due:
            producer.produce(
                way.source, value=f"low {sent}".encode(), partition=sent % settings.CAP
            )
            sent += 1
        producer.poll(0)
        time.sleep(0.02)
    producer.flush(30)


def sample_spike(
    b: benches.Bench,
    way: spikeways.Way,
    started: float,
    samples: list[Sample],
    stop: threading.Event,
) -> None:
    """Every second: Running executor pods, the group's lag and the count asked for (own
    clients: a thread)."""
    core = client.CoreV1Api(client.ApiClient())
    custom = client.CustomObjectsApi(client.ApiClient())
    reader = LagReader({"bootstrap.servers": b.bootstrap}, timeout=5)
    while not stop.is_set():
        tick = time.monotonic()
        try:
            count = observing.running(core, way.namespace, way.app)
            lag = observing.group_lag(reader, way.namespace, way.app, way.source)
            requested = requested_executors(core, custom, way)
            samples.append(Sample(at=tick - started, running=count, lag=lag, requested=requested))
        except Exception as error:  # a missed sample stretches the previous one
            print(f"  sample failed: {error}", flush=True)
        stop.wait(max(0.0, 1.0 - (time.monotonic() - tick)))


def requested_executors(core: Any, custom: Any, way: spikeways.Way) -> int | None:
    """The executor count the way's autoscaler asks for: the App's status.executors.desired
    (Rillet, and fixed), or Spark's target (`numberTargetExecutors` of the driver's
    ExecutorAllocationManager metrics, on its UI port) for dynamic allocation."""
    if not way.unwatched:
        found = custom.get_namespaced_custom_object(
            settings.GROUP, settings.VERSION, way.namespace, "apps", way.app
        )
        desired = ((found.get("status") or {}).get("executors") or {}).get("desired")
        return desired if isinstance(desired, int) else None
    drivers = [
        p for p in observing.pods_of(core, way.namespace, way.app, "driver") if p.status.pod_ip
    ]
    if not drivers:
        return None
    url = f"http://{drivers[0].status.pod_ip}:{settings.SPARK_UI_PORT}/metrics/json"
    with urllib.request.urlopen(url, timeout=5) as response:
        gauges = json.load(response).get("gauges", {})
    target = [
        g["value"] for name, g in gauges.items() if name.endswith(settings.TARGET_EXECUTORS_GAUGE)
    ]
    return int(target[0]) if target else None


def count_moves(samples: list[Sample]) -> int:
    """Scale events grouped: changes of the Running count in the same direction, each within
    MOVE_SECONDS of the one before, count once (a scale from 4 to 1 ends pods one by one)."""
    moves, last_direction, last_at = 0, 0, float("-inf")
    for before, after in itertools.pairwise(samples):
        if after.running == before.running:
            continue
        direction = 1 if after.running > before.running else -1
        if direction != last_direction or after.at - last_at > settings.MOVE_SECONDS:
            moves += 1
        last_direction, last_at = direction, after.at
    return moves


def executor_seconds(samples: list[Sample], window: float) -> float:
    """The Running executor count integrated over [first sample, window] (each sample holds
    until the next)."""
    ends = [*samples[1:], Sample(at=window, running=0, lag=None)]
    return sum(s.running * max(0.0, nxt.at - s.at) for s, nxt in zip(samples, ends, strict=True))


def describe_series(series: Iterable[int]) -> str:
    """The counts a series went through, with how long each lasted: 1(12s) 4(60s) 1(...)."""
    runs = [(count, len(list(group))) for count, group in itertools.groupby(series)]
    return " ".join(f"{count}({length}s)" for count, length in runs)


def report_spike(results: list[SpikeResult]) -> reports.Report:
    rillet, dynamic, fixed = results
    lines = [
        f"spike: {settings.SPIKE_RECORDS:,} records at once, then {settings.LOW_RATE}/s; "
        f"{settings.CAP} partitions, {settings.SPIKE_SLEEP_MS} ms per record; executor-seconds "
        f"over {settings.SPIKE_WINDOW:.0f} s from the burst; drained = lag <= "
        f"{settings.DRAINED_LAG}",
        f"  {'':28}{'drain s':>9}{'exec-s':>9}{'scale events':>14}{'pod changes':>13}{'moves':>7}",
    ]
    for r in results:
        lines.append(
            f"  {r.way:<28}{reports.fmt(r.drain):>9}{r.executor_seconds:>9.0f}{r.requests:>14}"
            f"{r.scale_events:>13}{r.scale_moves:>7}"
        )
    ratios: dict[str, float | None] = {}
    for name, r in (("rillet", rillet), ("dynamic_allocation", dynamic)):
        ratios[f"{name}_executor_seconds_vs_fixed"] = reports.ratio(
            r.executor_seconds, fixed.executor_seconds
        )
        ratios[f"{name}_drain_vs_fixed"] = reports.ratio(r.drain, fixed.drain)
    cheaper, drain = ratios["rillet_executor_seconds_vs_fixed"], ratios["rillet_drain_vs_fixed"]
    lines += [
        f"  Rillet vs fixed: executor-seconds {reports.fmt(cheaper, 2)}x (target <= 0.60 "
        f"{reports.verdict(cheaper is not None and cheaper <= 0.60)}), drain "
        f"{reports.fmt(drain, 2)}x (target <= 1.2x "
        f"{reports.verdict(drain is not None and drain <= 1.2)})",
        f"  dynamic allocation vs fixed: executor-seconds "
        f"{reports.fmt(ratios['dynamic_allocation_executor_seconds_vs_fixed'], 2)}x, drain "
        f"{reports.fmt(ratios['dynamic_allocation_drain_vs_fixed'], 2)}x",
        f"  scale events (changes of the count asked for): Rillet {rillet.requests} vs dynamic "
        f"allocation {dynamic.requests} (target fewer "
        f"{reports.verdict(rillet.requests < dynamic.requests)}); changes of the Running pods "
        f"{rillet.scale_events} vs {dynamic.scale_events}, moves (those in one direction "
        f"within {settings.MOVE_SECONDS:.0f} s counted once) {rillet.scale_moves} vs "
        f"{dynamic.scale_moves}",
    ]
    figures = {
        "spike": [{**dataclasses.asdict(r), "series": describe_series(r.series)} for r in results],
        **{f"spike_{key}": value for key, value in ratios.items()},
    }
    return figures, lines
