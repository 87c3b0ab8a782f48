"""The word count most node tests run: its Topic, Table and App, lines of random words with
their ground truth, the Table read back from Kafka, and the App's pods as the apiserver lists
them."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Producer

from rillet.tables import tables

from .conftest import Kube
from .objects import condition, get, topic
from .polling import wait_for

VOCABULARY = [f"w{n}" for n in range(300)] + ["kafka", "spark", "rillet"]
SMALL = {"cpu": "200m", "memory": "1Gi"}  # two cores: room for a driver and several executors
# The JVMs of the Apps of most node tests compile with C1 only (as the test session's own Spark
# does, tests/conftest.py): what those tests prove does not depend on C2, and the node's two
# cores are the suite's. The word count's story in test_apps_on_node runs the JVMs as users get
# them.
C1_ONLY = {
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1",
}


def word_count(
    name: str,
    namespace: str,
    *,
    image: str,
    reads: str,
    writes: str,
    sql: str,
    spark_conf: Mapping[str, str] | None = C1_ONLY,
) -> list[dict[str, Any]]:
    """A Topic of lines, a Table of counts, and the App between them (with `spark_conf`)."""
    return [
        topic(reads, namespace, partitions=6, deletionPolicy="Delete"),
        {
            "apiVersion": "rillet.io/v1alpha1",
            "kind": "Table",
            "metadata": {"name": writes, "namespace": namespace},
            "spec": {
                "keyFormat": "string",
                "valueFormat": "json",
                "valueSchema": "word STRING, count BIGINT",
                "deletionPolicy": "Delete",
            },
        },
        {
            "apiVersion": "rillet.io/v1alpha1",
            "kind": "App",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "image": image,
                "inputs": [
                    {
                        "name": "lines",
                        "topicRef": {"name": reads},
                        "format": "string",
                        "startingOffsets": "earliest",
                    }
                ],
                "pipeline": {"sql": sql},
                "outputs": [{"tableRef": {"name": writes}, "keyColumns": ["word"]}],
                "scaling": {"minExecutors": 1, "maxExecutors": 2, "lagTarget": 20000},
                "driver": SMALL,
                "executor": SMALL,
                **({"sparkConf": dict(spark_conf)} if spark_conf else {}),
            },
        },
    ]


COUNT_WORDS = """
SELECT word, count(*) AS count
FROM (SELECT explode(split(lower(value), '[^a-z0-9]+')) AS word FROM lines)
WHERE word != ''
GROUP BY word
"""


def produce_lines(
    bootstrap: str, topic_name: str, count: int, seed: int, *, config: Mapping[str, Any] = {}
) -> Counter[str]:
    """Random lines of words, and how many times each word was written (`config`: a login)."""
    rng = random.Random(seed)
    producer = Producer({**config, "bootstrap.servers": bootstrap, "linger.ms": 20})
    truth: Counter[str] = Counter()
    for _ in range(count):
        line = " ".join(rng.choice(VOCABULARY).capitalize() for _ in range(rng.randint(1, 5)))
        truth.update(w for w in re.split("[^a-z0-9]+", line.lower()) if w)
        producer.produce(topic_name, value=line.encode())
        producer.poll(0)
    assert producer.flush(60) == 0
    return truth


def table_counts(
    bootstrap: str, topic_name: str, *, config: Mapping[str, Any] | None = None
) -> dict[str, int]:
    latest = tables.latest_per_key(
        tables.read_changelog(
            bootstrap_servers=bootstrap, topic=topic_name, timeout=60, kafka_config=config
        )
    )
    return {
        (key or b"").decode(): json.loads(value)["count"]
        for key, value in ((e.key, e.value) for e in latest.values())
        if value is not None
    }


def wait_table(
    bootstrap: str,
    topic_name: str,
    truth: Counter[str],
    *,
    timeout: float,
    config: Mapping[str, Any] | None = None,
) -> None:
    def exact() -> bool:
        try:
            return table_counts(bootstrap, topic_name, config=config) == dict(truth)
        except LookupError:  # the operator has not created the Table's topic yet
            return False

    wait_for(
        exact,
        timeout=timeout,
        interval=5,
        what=f"Table {topic_name} to equal the ground truth ({sum(truth.values())} words)",
    )


def pods(kube: Kube, namespace: str, role: str) -> list[dict[str, Any]]:
    return kube.api.list("pod", namespace, labels=f"rillet.io/role={role}")


def running(kube: Kube, namespace: str, role: str) -> list[dict[str, Any]]:
    return [p for p in pods(kube, namespace, role) if p["status"].get("phase") == "Running"]


def driver_running(kube: Kube, namespace: str) -> Callable[[], dict[str, Any] | None]:
    def probe() -> dict[str, Any] | None:
        found = running(kube, namespace, "driver")
        return found[0] if found else None

    return probe


def names(prefix: str) -> tuple[str, str, str]:
    """The App, its Topic and its Table (their Kafka topics under the test's prefix)."""
    return f"{prefix}-wc", f"{prefix}-lines", f"{prefix}-counts"


def stalled(kube: Kube, app: str, namespace: str) -> Callable[[], dict[str, Any] | None]:
    """A probe: the App's Stalled condition once it is True, else None."""

    def probe() -> dict[str, Any] | None:
        found = condition(get(kube, "app", app, namespace), "Stalled")
        return found if found.get("status") == "True" else None

    return probe
