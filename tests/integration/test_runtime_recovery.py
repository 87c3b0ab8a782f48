"""A driver killed or stopped mid-stream, restarted from its checkpoint (`rillet run` processes).

The App counts words into a Table and copies every input record, keyed by its partition and
offset, to an append Topic (two queries, one checkpoint each).

Test plan:
- SIGKILL to the driver's whole process group (Python and its JVM) after some batches, then a
  restart with --available-now: the Table equals the ground truth exactly (no loss, no double
  counting); the append Topic holds every input record at least once, with at most one batch
  repeated; the duplicates there are counted and reported in the session's summary
  ("measurements and notes") as well as in the JUnit properties (at-least-once sink);
- a warm standby: a second `rillet run` on the same checkpoint while the first runs stands by
  (the checkpoint's lock), warms up and starts nothing; the first keeps going (no concurrent
  update of the checkpoint); SIGKILL to the first mid-stream, and the standby takes over and
  runs to the end: the Table equals the ground truth exactly, every record is copied (the
  App's SQL makes a plain temporary view, which the warm-up must not leave behind); a third
  driver, standing by too, sent SIGTERM, exits 0 at once and never takes over;
- SIGTERM to the driver's Python process only (as the kubelet signals a container's PID 1)
  mid-stream: the driver exits 0 at a batch boundary (a batch begun but not written is refused,
  not cut), and after a restart the append Topic holds every record exactly once.
Every driver's process group (its JVM included) is killed when the test leaves it, whatever
happened: a driver that hangs leaves nothing running into later tests.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from rillet.tables import tables
from tests.integration import runtime_helpers as rt
from tests.integration.polling import wait_for

LINES = 20_000
PARTITIONS = 4
PER_BATCH = 2_500

MANIFEST = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: sentences}
spec: {partitions: 4}
---
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: copies}
spec: {partitions: 4}
---
apiVersion: rillet.io/v1alpha1
kind: Table
metadata: {name: word-counts}
spec:
  partitions: 4
  valueSchema: "word STRING, count BIGINT"
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {name: recovering, namespace: crash}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - name: sentences
      topicRef: {name: sentences}
      format: string
      startingOffsets: earliest
  pipeline:
    sql: |
      -- every record, keyed by where it came from (to count duplicates downstream); not
      -- OR REPLACE: a standby's warm-up must leave no view behind for its takeover to meet
      CREATE TEMPORARY VIEW copied AS
        SELECT partition, offset, value AS line FROM sentences;
      SELECT word, count(*) AS count
      FROM (SELECT explode(split(lower(value), '[^a-z0-9]+')) AS word FROM sentences)
      WHERE word != ''
      GROUP BY word
  outputs:
    - tableRef: {name: word-counts}
      keyColumns: [word]
    - topicRef: {name: copies}
      from: copied
      keyColumns: [partition, offset]
"""


def _setup(
    kafka_admin: AdminClient, bootstrap: str, prefix: str, tmp_path: Path
) -> tuple[Path, dict[str, str], dict[str, int]]:
    documents = rt.load_manifests(MANIFEST)
    topics = rt.privatize(documents, prefix)
    rt.create_topics(
        kafka_admin,
        [
            NewTopic(topics["sentences"], PARTITIONS, 1),
            NewTopic(topics["copies"], PARTITIONS, 1),
            NewTopic(topics["word-counts"], PARTITIONS, 1, config={"cleanup.policy": "compact"}),
        ],
    )
    truth = _produce_lines(bootstrap, topics["sentences"], seed=7)
    return rt.write_manifests(documents, tmp_path / "app.yaml"), topics, dict(truth)


def _produce_lines(bootstrap: str, topic: str, *, seed: int) -> Counter[str]:
    """LINES random lines of words into `topic`; their word counts."""
    rng = random.Random(seed)
    lines = [
        " ".join(
            rng.choice(["a", "b", "c", "d", "e", "f", "g"]) + str(rng.randint(0, 60))
            for _ in range(rng.randint(1, 5))
        )
        for _ in range(LINES)
    ]
    rt.produce(bootstrap, topic, ((None, line) for line in lines), partitions=PARTITIONS)
    return Counter(w for line in lines for w in re.split("[^a-z0-9]+", line) if w)


def _processed(bootstrap: str, topic: str) -> int:
    return sum(
        rt.committed_offsets(bootstrap, "rillet.crash.recovering", topic, PARTITIONS).values()
    )


def _written(bootstrap: str, topic: str) -> int:
    return sum(rt.end_offsets(bootstrap, topic).values())


def _committed(query_checkpoint: Path) -> int:
    """Records the query's committed batches read (its checkpoint: commits/N, offsets/N)."""
    batches = [int(p.name) for p in (query_checkpoint / "commits").iterdir() if p.name.isdigit()]
    if not batches:
        return 0
    lines = (query_checkpoint / "offsets" / str(max(batches))).read_text().splitlines()
    return sum(sum(parts.values()) for parts in json.loads(lines[2]).values())


def _table(bootstrap: str, topic: str) -> dict[str, int]:
    latest = tables.latest_per_key(rt.read_topic(bootstrap, topic))
    return {k.decode(): json.loads(e.value or b"null")["count"] for k, e in latest.items()}


def _wait_for_a_quarter(bootstrap: str, topic: str, *, after: int = 0) -> None:
    wait_for(
        lambda: _processed(bootstrap, topic) >= after + LINES // 4,
        timeout=180,
        interval=0.1,
        what="a quarter of the input processed",
    )


def test_sigkill_mid_stream_then_restart_keeps_the_table_exact(
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
    record_property: Callable[[str, object], None],
    measurement: Callable[[str], None],
) -> None:
    manifest, topics, truth = _setup(kafka_admin, kafka_bootstrap, kafka_prefix, tmp_path)
    with rt.killed_at_exit(
        rt.start_driver(manifest, kafka_bootstrap, tmp_path, per_batch=PER_BATCH),
        log=tmp_path / "driver.log",
    ) as driver:
        _wait_for_a_quarter(kafka_bootstrap, topics["sentences"])
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    killed_at = _processed(kafka_bootstrap, topics["sentences"])
    assert killed_at < LINES, "the driver should have been killed mid-stream"

    rt.run_driver_to_end(manifest, kafka_bootstrap, tmp_path, per_batch=PER_BATCH)

    assert _table(kafka_bootstrap, topics["word-counts"]) == truth
    copies = rt.copied_positions(kafka_bootstrap, topics["copies"])
    assert len(copies) == LINES  # every input record, none lost
    duplicates = sum(n - 1 for n in copies.values())
    record_property("append_duplicates_after_sigkill", duplicates)
    measurement(
        f"SIGKILL after {killed_at} of {LINES} records committed: {duplicates} duplicate "
        f"records in the append output (at most one batch, {PER_BATCH}, may repeat)"
    )
    assert duplicates <= PER_BATCH, "more than the one batch in flight was written again"


def test_sigterm_stops_at_a_batch_boundary_without_duplicates(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path
) -> None:
    manifest, topics, truth = _setup(kafka_admin, kafka_bootstrap, kafka_prefix, tmp_path)
    with rt.killed_at_exit(
        rt.start_driver(manifest, kafka_bootstrap, tmp_path, per_batch=PER_BATCH),
        log=tmp_path / "driver.log",
    ) as driver:
        _wait_for_a_quarter(kafka_bootstrap, topics["sentences"])
        driver.send_signal(signal.SIGTERM)  # the Python process only, as a kubelet would
        assert driver.wait(timeout=120) == 0, (tmp_path / "driver.log").read_text()[-3000:]
    assert _processed(kafka_bootstrap, topics["sentences"]) < LINES
    log = (tmp_path / "driver.log").read_text()
    assert "received SIGTERM" in log
    assert "still busy" not in log  # each query stopped at its boundary, none was cut

    rt.run_driver_to_end(manifest, kafka_bootstrap, tmp_path, per_batch=PER_BATCH)

    assert _table(kafka_bootstrap, topics["word-counts"]) == truth
    copies = rt.copied_positions(kafka_bootstrap, topics["copies"])
    assert len(copies) == LINES
    assert max(copies.values()) == 1, "a batch-boundary stop sends nothing twice"


def _standby(manifest: Path, bootstrap: str, tmp_path: Path, log: Path) -> subprocess.Popen[bytes]:
    """A second `rillet run` of the App on its checkpoint, to the end of its input."""
    checkpoint = str(tmp_path / "checkpoint")
    per_batch = str(PER_BATCH)
    return rt.cli_run(
        manifest,
        *("-b", bootstrap, "--checkpoint-dir", checkpoint, "--max-offsets-per-trigger", per_batch),
        "--available-now",
        log=log,
    )


def _warmed(log: Path) -> None:
    wait_for(
        lambda: "warmed up in" in log.read_text(errors="replace"),
        timeout=180,
        interval=0.2,
        what=f"the standby of {log.name} warmed up",
    )


def test_a_standby_takes_over_from_a_killed_driver_and_the_table_stays_exact(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path
) -> None:
    manifest, topics, truth = _setup(kafka_admin, kafka_bootstrap, kafka_prefix, tmp_path)
    standby_log, stopped_log = tmp_path / "standby.log", tmp_path / "stopped-standby.log"
    with rt.killed_at_exit(
        rt.start_driver(manifest, kafka_bootstrap, tmp_path, per_batch=PER_BATCH),
        log=tmp_path / "driver.log",
    ) as driver:
        _wait_for_a_quarter(kafka_bootstrap, topics["sentences"])
        with (
            rt.killed_at_exit(
                _standby(manifest, kafka_bootstrap, tmp_path, standby_log), log=standby_log
            ) as standby,
            rt.killed_at_exit(
                _standby(manifest, kafka_bootstrap, tmp_path, stopped_log), log=stopped_log
            ) as stopped,
        ):
            _warmed(standby_log)
            _warmed(stopped_log)
            # A standby stopped while it stands by ends at once, having started nothing.
            stopped.send_signal(signal.SIGTERM)
            assert stopped.wait(timeout=60) == 0, stopped_log.read_text()[-3000:]
            more = _produce_lines(kafka_bootstrap, topics["sentences"], seed=8)
            _wait_for_a_quarter(kafka_bootstrap, topics["sentences"], after=LINES)
            waiting = standby_log.read_text(errors="replace")
            assert "standing by until it is free" in waiting, waiting[-3000:]
            assert "taking over" not in waiting  # it started no query while the first one ran
            assert driver.poll() is None, "the first driver stopped while the standby waited"
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(timeout=30)
            killed_at = _processed(kafka_bootstrap, topics["sentences"])
            assert killed_at < 2 * LINES, "the driver should have been killed mid-stream"
            assert standby.wait(timeout=300) == 0, standby_log.read_text()[-3000:]

    logs = [p.read_text() for p in (tmp_path / "driver.log", standby_log, stopped_log)]
    assert not any("CONCURRENT_STREAM_LOG_UPDATE" in log for log in logs)
    assert "taking over" in logs[1]
    assert "taking over" not in logs[2]
    assert _table(kafka_bootstrap, topics["word-counts"]) == dict(Counter(truth) + more)
    assert len(rt.copied_positions(kafka_bootstrap, topics["copies"])) == 2 * LINES
