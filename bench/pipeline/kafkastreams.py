"""(e) the word count on Kafka Streams (bench/kstreams/WordCount.java), compiled here."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

from bench.pipeline import feeding, settings

KAFKA_STREAMS_SOURCE = settings.REPO / "bench/kstreams/WordCount.java"


def kafka_streams_classpath(workdir: Path) -> str:
    """Kafka Streams' jars (fetched once into the cache) and WordCount, compiled here."""
    from rillet_devstack import provisioning

    libs = provisioning.provision(provisioning.KAFKA_STREAMS) / "libs"
    classpath = f"{libs}/*"
    classes = workdir / "kstreams-classes"
    subprocess.run(
        ["javac", "-d", str(classes), "-cp", classpath, str(KAFKA_STREAMS_SOURCE)], check=True
    )
    return f"{classes}:{classpath}"


def bench_kafka_streams(
    bootstrap: str,
    source: str,
    words: int,
    guarantee: str,
    classpath: str,
    workdir: Path,
    *,
    config: settings.Settings,
) -> tuple[float, float]:
    """Records/s of the Kafka Streams word count (one stream thread, default record cache):
    whole run, and steady state."""
    name = f"bench.kstreams.{uuid.uuid4().hex[:8]}"
    target = feeding.create_topic(
        bootstrap, name, settings.PARTITIONS, **{"cleanup.policy": "compact"}
    )
    state = workdir / uuid.uuid4().hex
    command = ["java", "-Xmx1g", "-cp", classpath, "WordCount", bootstrap, source, target]
    command += [str(config.records), str(words), guarantee, str(state)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"Kafka Streams failed: {result.stderr[-3000:]}")
    figures = json.loads(lines[-1])
    return config.records / float(figures["seconds"]), float(figures["steady"])
