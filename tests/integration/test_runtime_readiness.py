"""A new App reading from `latest` is Ready only once it reads (a `rillet run` process).

A driver pod is Ready when its metrics port answers. Spark fixes a new query's `latest` offsets
on its first trigger, after the query has started: had the port opened at start, records written
between Ready and that trigger would be skipped, and a user who waits for Ready before writing
would lose them.

Test plan: records written before the driver starts are not read (`latest`); the moment its
metrics page answers, 500 more are written, and the App's output holds exactly those 500. The
driver's JVM has mapped the class archive `rillet dev up` made for this checkout: a JVM ignores
an archive made on another class path (another virtualenv), and then starts seconds later.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from confluent_kafka.admin import AdminClient, NewTopic

from rillet_devstack import spark as devspark
from tests.integration import runtime_helpers as rt
from tests.integration.polling import wait_for

MANIFEST = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: lines}
spec: {partitions: 2}
---
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: copies}
spec: {partitions: 2}
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {name: copying, namespace: ready}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - name: lines
      topicRef: {name: lines}
      format: string
  pipeline:
    sql: SELECT value AS line FROM lines
  outputs:
    - topicRef: {name: copies}
      valueColumns: [line]
      valueFormat: string
"""

_SERVING = re.compile(r"metrics on http://127\.0\.0\.1:(\d+)/metrics")


def _metrics_port(log: Path) -> int | None:
    """The port the driver serves metrics on, once its log says so."""
    found = _SERVING.search(log.read_text(errors="replace")) if log.exists() else None
    return int(found.group(1)) if found else None


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def test_records_written_once_the_driver_is_ready_are_all_read(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path
) -> None:
    documents = rt.load_manifests(MANIFEST)
    topics = rt.privatize(documents, kafka_prefix)
    rt.create_topics(kafka_admin, [NewTopic(topics[name], 2, 1) for name in ("lines", "copies")])
    manifest = rt.write_manifests(documents, tmp_path / "app.yaml")
    rt.produce(kafka_bootstrap, topics["lines"], ((None, f"old {i}") for i in range(1_000)))

    log = tmp_path / "driver.log"
    process = rt.cli_run(
        manifest,
        "-b",
        kafka_bootstrap,
        "--checkpoint-dir",
        str(tmp_path / "checkpoint"),
        "--metrics-port",
        "0",
        log=log,
    )
    with rt.killed_at_exit(process, log=log) as driver:
        port = wait_for(
            lambda: _metrics_port(log) if driver.poll() is None else -1,
            timeout=180,
            interval=0.05,
            what="the driver's metrics port",
        )
        assert port > 0, log.read_text()[-3000:]
        assert _answers(port)
        archive = devspark.class_archive()
        assert archive is not None
        assert [pid for pid in rt.jvms(driver) if rt.maps(pid, archive)], log.read_text()[:3000]
        new = [f"new {i}" for i in range(500)]
        rt.produce(kafka_bootstrap, topics["lines"], ((None, line) for line in new))

        def copied() -> list[str]:
            return [
                (e.value or b"").decode() for e in rt.read_topic(kafka_bootstrap, topics["copies"])
            ]

        wait_for(lambda: len(copied()) >= len(new), timeout=120, interval=1, what="500 copies")
        assert sorted(copied()) == sorted(new)
