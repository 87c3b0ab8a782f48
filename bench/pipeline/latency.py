"""Latency from producing a record to reading its result, with a processing-time trigger
and in real-time mode, and where the batches' time goes (`--only latency`).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import threading
import time
import uuid

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

from bench.pipeline import feeding, medians, settings, sparkworker

Latency = tuple[float, float, int]


def measure_latency(
    bootstrap: str, *, trigger: str, stateless: bool
) -> tuple[tuple[float, float, int], dict[str, list[float]]]:
    """p50 and p99 (ms) from producing a record to reading its result, and the sample count;
    the milliseconds of each phase of each batch (batch_phases)."""
    partitions = 1 if stateless else 2  # real-time mode needs a core per partition
    source = feeding.create_topic(bootstrap, f"bench.lat.{uuid.uuid4().hex[:8]}", partitions)
    target = feeding.create_topic(
        bootstrap,
        f"bench.latout.{uuid.uuid4().hex[:8]}",
        partitions,
        **({} if stateless else {"cleanup.policy": "compact"}),
    )
    with tempfile.TemporaryDirectory() as checkpoint:
        command = [
            *sparkworker.WORKER,
            "--bootstrap",
            bootstrap,
            "--master",
            "local[2]",
            "--source",
            source,
            "--target",
            target,
            "--checkpoint",
            checkpoint,
            "--trigger",
            trigger,
            "--partitions",
            str(partitions),
            *(["--stateless"] if stateless else []),
        ]
        worker = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=settings.REPO,
        )
        try:
            assert worker.stdout is not None
            for line in worker.stdout:
                if line.startswith("{"):
                    break
            measured = _latencies(bootstrap, source, target, partitions=partitions)
            assert worker.stdin is not None
            worker.stdin.close()
            reports = [json.loads(line) for line in worker.stdout if line.startswith("{")]
            phases: dict[str, list[float]] = next(
                (r["phases"] for r in reports if "phases" in r), {}
            )
            return measured, phases
        finally:
            if worker.stdin is not None and not worker.stdin.closed:
                worker.stdin.close()
            worker.wait(timeout=120)


def _latencies(
    bootstrap: str, source: str, target: str, *, partitions: int
) -> tuple[float, float, int]:
    """Produce unique words at LATENCY_RATE; time until each one's result is read."""
    sent: dict[str, float] = {}
    latencies: list[float] = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench.{uuid.uuid4().hex}",
            "fetch.wait.max.ms": 5,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(target, p, OFFSET_END) for p in range(partitions)])
    consumer.consume(timeout=1.0)  # the assignment takes effect
    stop = threading.Event()

    def read() -> None:
        # One message per poll: consume(num_messages=N) returns only once N arrived or its
        # timeout passed, which would add up to that timeout to every latency measured.
        while not stop.is_set():
            message = consumer.poll(timeout=0.1)
            if message is None or message.error():
                continue
            received = time.monotonic()
            key = (message.key() or b"").decode()  # the word, or the line
            if key in sent:
                latencies.append((received - sent.pop(key)) * 1000)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    warmup = 10 * settings.LATENCY_RATE  # JIT and caches warm up first
    for index in range(settings.LATENCY_SECONDS * settings.LATENCY_RATE + warmup):
        word = f"lat{index}x{uuid.uuid4().hex[:6]}"
        producer.produce(source, value=word)
        producer.poll(0)
        if index >= warmup:
            sent[word] = time.monotonic()
        time.sleep(1 / settings.LATENCY_RATE)
    producer.flush(10)
    deadline = time.monotonic() + 30
    while sent and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    reader.join(timeout=5)
    consumer.close()
    if len(latencies) < 10:
        raise RuntimeError(f"only {len(latencies)} results arrived")
    return statistics.median(latencies), medians.p99(latencies), len(latencies)


def median_latency(
    bootstrap: str, *, trigger: str, stateless: bool, config: settings.Settings
) -> Latency:
    """Median over REPEATS runs of each run's p50 and p99 (one run is a 20 s window on a
    shared machine: its p99 moves with whatever else runs); the sample count is the total."""
    runs = []
    phases: dict[str, list[float]] = {}
    for attempt in range(config.repeats):
        measured, batches = measure_latency(bootstrap, trigger=trigger, stateless=stateless)
        print(
            f"  run {attempt + 1}: p50 {measured[0]:.0f} ms, p99 {measured[1]:.0f} ms", flush=True
        )
        runs.append(measured)
        for name, values in batches.items():
            phases.setdefault(name, []).extend(values)
    if trigger == "processing-time":
        report_phases(phases)
    return (
        statistics.median(r[0] for r in runs),
        statistics.median(r[1] for r in runs),
        sum(r[2] for r in runs),
    )


def latencies(bootstrap: str, *, config: settings.Settings) -> tuple[Latency, Latency | str]:
    print("latency: processing-time trigger (word count into a Table) ...", flush=True)
    micro = median_latency(bootstrap, trigger="processing-time", stateless=False, config=config)
    print("latency: real-time mode (stateless, topic to topic) ...", flush=True)
    try:
        real_time: Latency | str = median_latency(
            bootstrap, trigger="real-time", stateless=True, config=config
        )
    except Exception as error:  # the failure is reported as the figure
        real_time = f"failed: {error}"
    return micro, real_time


def report_phases(phases: dict[str, list[float]]) -> None:
    """Where the batches' time went: p50 and p99 of each phase over every batch of the runs."""
    batches = len(phases.get("triggerExecution", []))
    if not batches:
        print("  no batch progress to break down")
        return
    print(f"  where a batch's time goes ({batches} batches that read records, all runs):")
    print(f"  {'phase':<34}{'p50 ms':>8}{'p99 ms':>8}")
    for name, label in sparkworker.PHASES.items():
        values = phases.get(name) or [0.0]
        print(f"  {label:<34}{statistics.median(values):>8.0f}{medians.p99(values):>8.0f}")


def report_latency(micro: Latency, real_time: Latency | str, *, config: settings.Settings) -> None:
    print(
        f"latency, processing-time trigger {settings.TRIGGER_MS} ms, produce -> Table update: "
        f"p50 {micro[0]:.0f} ms, p99 {micro[1]:.0f} ms (medians of {config.repeats} runs, "
        f"{micro[2]} records; target p99 <= 1 s)"
    )
    if isinstance(real_time, str):
        print(f"latency, real-time mode: {real_time}")
    else:
        print(
            f"latency, real-time mode, stateless produce -> output: p50 {real_time[0]:.0f} ms, "
            f"p99 {real_time[1]:.0f} ms (medians of {config.repeats} runs, {real_time[2]} records; "
            f"target p99 <= 100 ms)"
        )
