"""The operator's lag reader on a Kafka whose group coordinator is still loading.

On a fresh cluster (or after a broker restart) the first offset fetch of a consumer group is
answered NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS. librdkafka's admin
list_consumer_group_offsets crashed the whole operator on that answer (SIGSEGV in
rd_kafka_cgrp_op, librdkafka issue #5040): the scaling loop's first pass on a new stack killed
the operator, silently. The reader runs here in its own process, from a worker thread as in the
operator, so that a crash is a failed test with the exit code rather than a dead test run.

Test plan:
- on a brand-new cluster, paced passes over a group that has committed nothing: the process
  survives, the lag is unknown while the coordinator loads and then the whole topic (read from
  the start), and after a commit exactly the records behind it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .conftest import separate_kafka

READER = textwrap.dedent(
    """
    import asyncio, json, sys
    from rillet.kafka.lag import LagReader

    bootstrap, group, topic, known = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    reader = LagReader({"bootstrap.servers": bootstrap}, timeout=10)

    async def observe():
        found = await reader.observe({group: [topic]}, from_start={(group, topic)})
        return found[(group, topic)].lag

    async def main():
        # Passes as the operator makes them (paced), until `known` of them knew the lag.
        lags, deadline = [], asyncio.get_running_loop().time() + 90
        while sum(lag is not None for lag in lags) < known:
            assert asyncio.get_running_loop().time() < deadline, lags
            lags.append(await observe())
            await asyncio.sleep(0.5)
        return lags

    print(json.dumps(asyncio.run(main())))
    reader.close()
    """
)


@pytest.fixture
def fresh_kafka(stack: object, tmp_path: Path) -> Iterator[str]:
    """A new single-broker cluster: no consumer offsets topic yet, as on a new stack."""
    with separate_kafka(tmp_path / "kafka") as bootstrap:
        yield bootstrap


def read_lags(bootstrap: str, group: str, topic: str, known: int) -> list[int | None]:
    """The lags of scaling passes until `known` of them knew it (from a process of its own)."""
    done = subprocess.run(
        [sys.executable, "-c", READER, bootstrap, group, topic, str(known)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"the lag reader died ({done.returncode}): {done.stderr[-2000:]}"
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_lag_while_the_coordinator_loads_is_unknown_then_exact(fresh_kafka: str) -> None:
    topic, group = "lines", "rillet.ns.app"
    admin = AdminClient({"bootstrap.servers": fresh_kafka})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(
        timeout=30
    )
    producer = Producer({"bootstrap.servers": fresh_kafka})
    for n in range(300):
        producer.produce(topic, value=b"x", partition=n % 3)
    assert producer.flush(30) == 0

    lags = read_lags(fresh_kafka, group, topic, known=3)
    # Unknown while the coordinator loads, then all of it: nothing committed, read from the start.
    assert set(lags) <= {None, 300}, lags
    assert lags[-3:] == [300, 300, 300], lags

    committer = Consumer({"bootstrap.servers": fresh_kafka, "group.id": group})
    committer.commit(offsets=[TopicPartition(topic, p, 60) for p in range(3)], asynchronous=False)
    committer.close()
    assert read_lags(fresh_kafka, group, topic, known=1) == [300 - 3 * 60]
