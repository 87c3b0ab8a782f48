"""(d) Kafka's ConsumerPerformance reading the topic: the ceiling of any consumer here."""

from __future__ import annotations

import subprocess

from bench.pipeline import settings


def bench_consumer_performance(bootstrap: str, source: str, *, config: settings.Settings) -> float:
    """Kafka's own consumer: fetch.nMsg.sec over the whole topic."""
    from rillet_devstack import provisioning

    libs = provisioning.KAFKA.directory / "libs"
    result = subprocess.run(
        [
            "java",
            "-Xmx512m",
            "-cp",
            f"{libs}/*",
            "org.apache.kafka.tools.ConsumerPerformance",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            source,
            "--messages",
            str(config.records),
            "--timeout",
            "60000",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    rows = [line for line in result.stdout.splitlines() if line and line[0].isdigit()]
    header = [line for line in result.stdout.splitlines() if line.startswith("start.time")]
    if not rows or not header:
        raise RuntimeError(f"ConsumerPerformance failed: {result.stdout}{result.stderr[-2000:]}")
    fields = dict(
        zip(
            [h.strip() for h in header[0].split(",")],
            [v.strip() for v in rows[-1].split(",")],
            strict=True,
        )
    )
    return float(fields["fetch.nMsg.sec"])
