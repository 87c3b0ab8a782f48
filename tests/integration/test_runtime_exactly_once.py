"""Exactly-once Topic outputs: a driver killed anywhere, or paused and fenced, writes nothing twice.

One App, three queries over the same input: a copy of every record keyed by its source
partition and offset (stateless) and the word counts as an upsert Topic (stateful), both with
delivery ExactlyOnce, and the same copy with the default AtLeastOnce.

Test plan:
- SIGKILL to the driver's process group (Python and its JVM) at 5 points mid-stream, each
  after more input was processed: the first once the at-least-once copy has written a batch
  its checkpoint has not committed (the driver paused to look), the others while a
  transaction is open if one opens (Kafka's read_uncommitted end offsets beyond the
  read_committed ones; at least one does), restarting each time, then a run to the end: a
  read_committed consumer finds every input record exactly once in the exactly-once copy, and
  each word's counts strictly increasing up to the ground truth (no count repeated, none
  missing at the end); the at-least-once copy holds every record, and duplicates, which are
  counted and reported;
- a zombie driver: paused with SIGSTOP (its whole process tree, Python workers included) inside
  a transaction, a second driver started on the same checkpoint (its lock unlinked, as where
  no lock holds) runs to the end, then the first resumed with SIGCONT: its transaction was
  fenced (Kafka aborted it when the second one's producer started), it fails instead of
  committing, and the copy still holds every record exactly once.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import random
import re
import signal
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from rillet.runtime.driver import driverlock
from rillet.tables import watermarks
from tests.integration import runtime_helpers as rt
from tests.integration.polling import wait_for

LINES = 20_000
PARTITIONS = 4
PER_BATCH = 500
# The run to the end after the kills (or after the zombie's pause) replays the interrupted
# batch as Spark logged it, then takes bigger batches: the guarantees are decided at the
# replay, and fewer batches make the test shorter.
FINAL_PER_BATCH = 5_000
KILLS = 5

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
kind: Topic
metadata: {name: loose-copies}
spec: {partitions: 4}
---
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: counts}
spec: {partitions: 4}
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {name: once, namespace: eos}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - name: sentences
      topicRef: {name: sentences}
      format: string
      startingOffsets: earliest
  pipeline:
    sql: |
      CREATE OR REPLACE TEMPORARY VIEW copied AS
        SELECT partition, offset, value AS line FROM sentences;
      SELECT word, count(*) AS count
      FROM (SELECT explode(split(lower(value), '[^a-z0-9]+')) AS word FROM sentences)
      WHERE word != ''
      GROUP BY word
  outputs:
    - topicRef: {name: copies}
      from: copied
      keyColumns: [partition, offset]
      delivery: ExactlyOnce
    - topicRef: {name: loose-copies}
      from: copied
      keyColumns: [partition, offset]
    - topicRef: {name: counts}
      mode: upsert
      keyColumns: [word]
      delivery: ExactlyOnce
"""


def _setup(
    kafka_admin: AdminClient, bootstrap: str, prefix: str, tmp_path: Path
) -> tuple[Path, dict[str, str], dict[str, int]]:
    documents = rt.load_manifests(MANIFEST)
    topics = rt.privatize(documents, prefix)
    rt.create_topics(
        kafka_admin,
        [
            NewTopic(topics[name], PARTITIONS, 1)
            for name in ("sentences", "copies", "loose-copies", "counts")
        ],
    )
    rng = random.Random(12)
    lines = [
        " ".join(f"w{rng.randint(0, 80)}" for _ in range(rng.randint(1, 5))) for _ in range(LINES)
    ]
    rt.produce(
        bootstrap, topics["sentences"], ((None, line) for line in lines), partitions=PARTITIONS
    )
    truth = Counter(w for line in lines for w in re.split("[^a-z0-9]+", line) if w)
    return rt.write_manifests(documents, tmp_path / "app.yaml"), topics, dict(truth)


def _processed(bootstrap: str, topic: str) -> int:
    return sum(rt.committed_offsets(bootstrap, "rillet.eos.once", topic, PARTITIONS).values())


def _progressed(bootstrap: str, topic: str, before: int) -> bool:
    return _processed(bootstrap, topic) > before


def _end_offsets(bootstrap: str, topic: str, isolation: str) -> list[int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "rillet.test.lso",
            "isolation.level": isolation,
        }
    )
    try:
        return [watermarks.watermarks(consumer, topic, p, timeout=10)[1] for p in range(PARTITIONS)]
    finally:
        consumer.close()


def _in_transaction(bootstrap: str, topic: str) -> bool:
    """Whether records of an open transaction sit in the topic (beyond the last stable offset)."""
    committed = _end_offsets(bootstrap, topic, "read_committed")
    written = _end_offsets(bootstrap, topic, "read_uncommitted")
    return any(w > c for w, c in zip(written, committed, strict=True))


def _counts(bootstrap: str, topic: str) -> dict[str, list[int]]:
    """Each word's counts in the order written, read_committed."""
    found: dict[str, list[int]] = defaultdict(list)
    for entry in sorted(rt.read_topic(bootstrap, topic), key=lambda e: (e.partition, e.offset)):
        found[(entry.key or b"").decode()].append(json.loads(entry.value or b"null")["count"])
    return found


def _kill_inside(driver: subprocess.Popen[bytes], bootstrap: str, topic: str) -> bool:
    """SIGKILL the driver's group, while a transaction is open if one opens within 20 s."""
    try:
        wait_for(
            lambda: _in_transaction(bootstrap, topic),
            timeout=20,
            interval=0.05,
            what="a transaction",
        )
        inside = True
    except AssertionError:
        inside = False
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(timeout=30)
    return inside


def _loose_batch_written_not_committed(
    driver: subprocess.Popen[bytes], bootstrap: str, topics: dict[str, str], workdir: Path
) -> bool:
    """With the driver paused (SIGSTOP to its group), whether the at-least-once copy holds a
    batch its checkpoint has not committed yet; the driver stays paused if so, to be killed
    there: the restarted driver writes that batch again. For a first run only: the copy then
    holds one record per input record read."""
    os.killpg(driver.pid, signal.SIGSTOP)
    try:
        [query] = (workdir / "checkpoint").rglob("outputs/*loose-copies*")
        done = [int(p.name) for p in (query / "commits").glob("[0-9]*")]
        read = 0
        if done:
            # An offset log entry: a version line, the batch's metadata, then the source's ends.
            ends = (query / "offsets" / str(max(done))).read_text().splitlines()[2]
            read = sum(json.loads(ends)[topics["sentences"]].values())
        written = sum(_end_offsets(bootstrap, topics["loose-copies"], "read_uncommitted"))
    except BaseException:
        os.killpg(driver.pid, signal.SIGCONT)
        raise
    if written > read:
        return True
    os.killpg(driver.pid, signal.SIGCONT)
    return False


def test_sigkill_at_five_points_leaves_every_record_exactly_once(
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
    record_property: Callable[[str, object], None],
    measurement: Callable[[str], None],
) -> None:
    manifest, topics, truth = _setup(kafka_admin, kafka_bootstrap, kafka_prefix, tmp_path)
    inside, points = 0, []
    for kill in range(KILLS):
        progressed = functools.partial(
            _progressed,
            kafka_bootstrap,
            topics["sentences"],
            _processed(kafka_bootstrap, topics["sentences"]),
        )
        with rt.killed_at_exit(
            rt.start_driver(manifest, kafka_bootstrap, tmp_path, per_batch=PER_BATCH),
            log=tmp_path / "driver.log",
        ) as driver:
            wait_for(progressed, timeout=180, interval=0.1, what=f"progress before kill {kill + 1}")
            if kill == 0:
                # Between the at-least-once copy's write and its checkpoint's commit: that
                # delivery's duplicates, which exactly-once exists to avoid, are then certain.
                wait_for(
                    functools.partial(
                        _loose_batch_written_not_committed,
                        driver,
                        kafka_bootstrap,
                        topics,
                        tmp_path,
                    ),
                    timeout=120,
                    interval=0.05,
                    what="an at-least-once batch written and not committed",
                )
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait(timeout=30)
            else:
                inside += _kill_inside(driver, kafka_bootstrap, topics["copies"])
        points.append(_processed(kafka_bootstrap, topics["sentences"]))
    assert points[-1] < LINES, f"the last kill came after the end: {points}"
    assert inside >= 1, "no kill landed inside a transaction"

    rt.run_driver_to_end(manifest, kafka_bootstrap, tmp_path, per_batch=FINAL_PER_BATCH)

    copies = rt.copied_positions(kafka_bootstrap, topics["copies"])
    assert len(copies) == LINES, "a record is missing from the exactly-once copy"
    assert max(copies.values()) == 1, "a record is twice in the exactly-once copy"
    counts = _counts(kafka_bootstrap, topics["counts"])
    assert {word: seen[-1] for word, seen in counts.items()} == truth
    repeated = {w: s for w, s in counts.items() if any(a >= b for a, b in itertools.pairwise(s))}
    assert not repeated, f"counts written twice: {list(repeated.items())[:3]}"

    loose = rt.copied_positions(kafka_bootstrap, topics["loose-copies"])
    assert len(loose) == LINES
    duplicates = sum(n - 1 for n in loose.values())
    assert duplicates > 0, "the first kill came after a written batch: it is written twice"
    record_property("at_least_once_duplicates_after_5_sigkills", duplicates)
    measurement(
        f"5 SIGKILLs after {points} of {LINES} records ({inside} inside a transaction): "
        f"exactly-once outputs 0 duplicates, 0 lost; at-least-once copy {duplicates} duplicates"
    )


def _process_tree(root: int) -> list[int]:
    """`root` and every process below it. The driver's group misses PySpark's Python workers:
    their daemon makes a process group of its own."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        parents[int(stat.parent.name)] = int(fields[1])
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        tree += frontier
    return tree


def _signal_tree(root: int, signum: signal.Signals) -> None:
    for pid in _process_tree(root):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def _paused_inside_a_transaction(
    driver: subprocess.Popen[bytes], bootstrap: str, topic: str
) -> bool:
    """SIGSTOP the driver's group when a transaction is open; True if it is still open once
    stopped (then it stays open), else resume it (SIGCONT) and say False."""
    if not _in_transaction(bootstrap, topic):
        return False
    _signal_tree(driver.pid, signal.SIGSTOP)
    # A commit sent just before the pause still completes at the broker: open means open for
    # a while after the pause.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        if not _in_transaction(bootstrap, topic):
            _signal_tree(driver.pid, signal.SIGCONT)
            return False
    return True


def test_a_paused_driver_resumed_after_another_took_over_is_fenced(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path
) -> None:
    manifest, topics, _ = _setup(kafka_admin, kafka_bootstrap, kafka_prefix, tmp_path)
    zombie_log = tmp_path / "zombie.log"
    with rt.killed_at_exit(
        rt.start_driver(manifest, kafka_bootstrap, tmp_path, per_batch=PER_BATCH)
    ) as zombie:
        wait_for(
            lambda: _processed(kafka_bootstrap, topics["sentences"]) > 0,
            timeout=180,
            interval=0.1,
            what="the first driver's progress",
        )
        wait_for(
            lambda: _paused_inside_a_transaction(zombie, kafka_bootstrap, topics["copies"]),
            timeout=120,
            interval=0.02,
            what="the first driver paused inside a transaction",
        )
        tree = _process_tree(zombie.pid)
        # On one machine the checkpoint's lock keeps a second driver out while the zombie's
        # JVM lives (runtime.driver.driverlock). Unlinked, the lock stands for where none holds (a
        # checkpoint on an object store, a node cut off): fencing alone must then keep the
        # zombie from committing.
        (tmp_path / "checkpoint" / driverlock.LOCK_FILE).unlink()
        try:
            (tmp_path / "driver.log").rename(zombie_log)
            rt.run_driver_to_end(manifest, kafka_bootstrap, tmp_path, per_batch=FINAL_PER_BATCH)
        finally:
            _signal_tree(zombie.pid, signal.SIGCONT)
        try:
            code = zombie.wait(timeout=240)
        finally:  # its Python workers too: they are not in the group killed_at_exit kills
            for pid in tree:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    log = zombie_log.read_text(errors="replace")
    assert code != 0, "the zombie driver went on after it was fenced"
    # Its commit fails as fenced, or (on a loaded machine) by timing out on records the broker
    # no longer takes from its fenced epoch. Spark then retries the task (local[N,4], as on a
    # cluster): the retry's new producer finds the unit written, and Spark refuses to commit
    # the batch another driver committed. Either way it committed nothing, which the copies
    # below prove.
    refused = r"fenced|FENCED|_TIMED_OUT|Failed to flush|CONCURRENT_STREAM_LOG_UPDATE"
    assert re.search(refused, log), log[-3000:]

    copies = rt.copied_positions(kafka_bootstrap, topics["copies"])
    assert len(copies) == LINES
    assert max(copies.values()) == 1, "the zombie's records reached read_committed consumers"
