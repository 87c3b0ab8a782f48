"""Benchmark of Table lookups: a served Table of 1,000,000 keys against the topic scan.

    .venv/bin/python bench/tables.py          # needs the local stack (`rillet dev up`)

On the local stack's broker: a compacted topic of PARTITIONS partitions holding KEYS JSON keys
(one record each), as an App's Table topic holds them. Then:
- (a) `rillet table serve` started on it: seconds until Ready (the store rebuilt from the
  whole topic, as at every server start);
- (b) HTTP lookups of random keys over one keep-alive connection, LOOKUPS per round, ROUNDS
  rounds: p50 and p99 (medians over the rounds), beside the same server's /healthz (an HTTP
  round trip with no lookup) as the baseline of the run; target p99 <= 10 ms;
- (c) `rillet table get KEY --server URL` as a user runs it, a new process each time: p50 and
  p99 of CLI_RUNS runs (Python's start-up included), and the lookup inside it alone;
- (d) the same `rillet table get` without a server: a bounded scan of the whole topic
  (SCAN_RUNS runs, median), the path every Table had before servers; ratio scan / served.

The machine has 2 cores shared by the broker, the server and the benchmark: figures are
medians, and the ratios are what carries over to other machines.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from rillet_devstack import processes, starting
from rillet_devstack import stack as devstack

KEYS = 1_000_000
PARTITIONS = 6
LOOKUPS = 2_000
ROUNDS = 3
CLI_RUNS = 20
SCAN_RUNS = 3
CLI = (sys.executable, "-m", "rillet.cli")
TABLE = "profiles"


def key_of(n: int) -> bytes:
    return json.dumps({"user": f"u{n:07d}"}, separators=(",", ":")).encode()


def value_of(n: int) -> bytes:
    return json.dumps({"user": f"u{n:07d}", "visits": n % 1000}, separators=(",", ":")).encode()


def fill(bootstrap: str, topic: str) -> float:
    """Write KEYS records; seconds it took."""
    started = time.monotonic()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1 << 20,
            "compression.type": "lz4",
        }
    )
    for n in range(KEYS):
        while True:
            try:
                producer.produce(topic, key=key_of(n), value=value_of(n))
                break
            except BufferError:
                producer.poll(0.05)
        if n % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return time.monotonic() - started


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def timed_gets(session: httpx.Client, urls: list[str]) -> list[float]:
    latencies = []
    for url in urls:
        started = time.perf_counter()
        response = session.get(url)
        latencies.append(time.perf_counter() - started)
        assert response.status_code == 200, (url, response.status_code, response.text)
    return latencies


def timed_cli(*args: str) -> float:
    """Seconds one `rillet table ...` process took; it must succeed."""
    started = time.perf_counter()
    done = subprocess.run([*CLI, "table", *args], capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    return elapsed


def main() -> None:
    state = devstack.running() or starting.up()
    bootstrap = state.kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"bench-tables-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"cleanup.policy": "compact"})])[
        topic
    ].result(timeout=60)
    workdir = Path(tempfile.mkdtemp(prefix="rillet-bench-tables-"))
    port = processes.free_port()
    server: subprocess.Popen[bytes] | None = None
    try:
        fill_seconds = fill(bootstrap, topic)
        print(f"wrote {KEYS} keys in {fill_seconds:.1f}s", flush=True)
        started = time.monotonic()
        server = start_server(bootstrap, topic, port, workdir)
        url = f"http://127.0.0.1:{port}"
        rng = random.Random(1)
        with httpx.Client(timeout=10) as session:
            wait_ready(session, url, server, workdir)
            ready_seconds = time.monotonic() - started
            print(f"(a) server Ready after {ready_seconds:.1f}s ({KEYS} keys loaded)", flush=True)
            served = lookup_rounds(session, url, rng)
        cli = cli_runs(bootstrap, topic, url, rng)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        admin.delete_topics([topic])[topic].result(timeout=60)
    report(ready_seconds, served, cli)


def start_server(bootstrap: str, topic: str, port: int, workdir: Path) -> subprocess.Popen[bytes]:
    """(a) `rillet table serve` on the topic, its log in `workdir`."""
    env = {**os.environ, "RILLET_KAFKA_BOOTSTRAP": bootstrap}
    return subprocess.Popen(
        [
            *CLI,
            "table",
            "serve",
            TABLE,
            f"--topic={topic}",
            "--key-format=json",
            f"--port={port}",
            f"--store-dir={workdir / 'store'}",
            "--host=127.0.0.1",
        ],
        env=env,
        stdout=(workdir / "server.log").open("wb"),
        stderr=subprocess.STDOUT,
    )


def wait_ready(
    session: httpx.Client, url: str, server: subprocess.Popen[bytes], workdir: Path
) -> None:
    while True:
        try:
            if session.get(f"{url}/readyz").status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert server.poll() is None, (workdir / "server.log").read_text()[-2000:]
        time.sleep(0.2)


Rounds = tuple[list[float], list[float], list[float], list[float]]


def lookup_rounds(session: httpx.Client, url: str, rng: random.Random) -> Rounds:
    """(b): per round, the lookups' p50 and p99 and those of /healthz."""
    lookup_p50, lookup_p99, health_p50, health_p99 = [], [], [], []
    for _ in range(ROUNDS):
        keys = [key_of(rng.randrange(KEYS)).decode() for _ in range(LOOKUPS)]
        urls = [f"{url}/tables/{TABLE}/{quote(k, safe='')}" for k in keys]
        lookups = timed_gets(session, urls)
        health = timed_gets(session, [f"{url}/healthz"] * LOOKUPS)
        lookup_p50.append(statistics.median(lookups))
        lookup_p99.append(percentile(lookups, 0.99))
        health_p50.append(statistics.median(health))
        health_p99.append(percentile(health, 0.99))
    return lookup_p50, lookup_p99, health_p50, health_p99


def cli_runs(
    bootstrap: str, topic: str, url: str, rng: random.Random
) -> tuple[list[float], list[float], list[float]]:
    """(c) and (d): seconds of `rillet table get` served, of its start-up, and by scan."""
    lookup_args = ["--topic", topic, "--key-format", "json", "-b", bootstrap]
    served = [
        timed_cli("get", TABLE, key_of(rng.randrange(KEYS)).decode(), *lookup_args, "--server", url)
        for _ in range(CLI_RUNS)
    ]
    startup_runs = [timed_cli("get", "--help") for _ in range(CLI_RUNS)]
    scans = [
        timed_cli(
            "get", TABLE, key_of(rng.randrange(KEYS)).decode(), *lookup_args, "--timeout", "600"
        )
        for _ in range(SCAN_RUNS)
    ]
    return served, startup_runs, scans


def report(
    ready_seconds: float, served: Rounds, cli: tuple[list[float], list[float], list[float]]
) -> None:
    lookup_p50, lookup_p99, health_p50, health_p99 = served
    served_cli, startup_runs, scans = cli
    p50, p99 = statistics.median(lookup_p50), statistics.median(lookup_p99)
    base50, base99 = statistics.median(health_p50), statistics.median(health_p99)
    cli50, cli99 = statistics.median(served_cli), percentile(served_cli, 0.99)
    startup = statistics.median(startup_runs)
    scan = statistics.median(scans)
    results = {
        "keys": KEYS,
        "a_ready_after_s": ready_seconds,
        "b_lookup_p50_ms": p50 * 1e3,
        "b_lookup_p99_ms": p99 * 1e3,
        "b_baseline_healthz_p50_ms": base50 * 1e3,
        "b_baseline_healthz_p99_ms": base99 * 1e3,
        "c_cli_served_p50_s": cli50,
        "c_cli_served_p99_s": cli99,
        "c_cli_startup_p50_s": startup,
        "d_cli_scan_median_s": scan,
    }
    print(json.dumps(results, indent=2))
    print(
        f"(b) HTTP lookup p50 {p50 * 1e3:.2f} ms p99 {p99 * 1e3:.2f} ms; baseline /healthz "
        f"p50 {base50 * 1e3:.2f} ms p99 {base99 * 1e3:.2f} ms; ratio p99/baseline "
        f"{p99 / base99:.1f}x  target p99<=10ms {'PASS' if p99 <= 0.010 else 'FAIL'}"
    )
    print(
        f"(c) rillet table get --server: p50 {cli50:.2f}s p99 {cli99:.2f}s per process, of "
        f"which Python and the CLI's start-up take {startup:.2f}s (`table get --help`); the "
        f"lookup itself is (b)"
    )
    print(
        f"(d) rillet table get by scan: {scan:.1f}s; ratio scan / served CLI {scan / cli50:.0f}x,"
        f" scan / served lookup {scan / p50:.0f}x"
    )


if __name__ == "__main__":
    main()
