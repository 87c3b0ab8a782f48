"""The local stack's broker and the benchmark's topics: finding the broker, creating and
deleting topics, producing the input lines.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.pipeline import settings


def bootstrap_servers() -> str:
    """The broker: RILLET_KAFKA_BOOTSTRAP, else the running local stack's."""
    if os.environ.get("RILLET_KAFKA_BOOTSTRAP"):
        return os.environ["RILLET_KAFKA_BOOTSTRAP"]
    from rillet_devstack import stack

    state = stack.running()
    if state is None:
        sys.exit("no local stack is running: start one with `.venv/bin/rillet dev up`")
    return state.kafka_bootstrap


def create_topic(bootstrap: str, name: str, partitions: int, **config: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(timeout=30)
    return name


def delete_bench_topics(bootstrap: str) -> None:
    """Every topic a benchmark made (inputs, outputs, Kafka Streams' internal ones): a run
    leaves millions of records behind otherwise."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [n for n in admin.list_topics(timeout=30).topics if n.startswith(("bench.", "bench-"))]
    for future in admin.delete_topics(names).values() if names else ():
        future.result(timeout=60)


# A line to the record value that carries it (the string itself, a JSON object, Avro, ...).
Encode = Callable[[str], str | bytes]


def produce_lines(bootstrap: str, topic: str, count: int, *, encode: Encode | None = None) -> int:
    """Produce `count` lines of 1 to 8 words, each encoded by `encode` (default: the string);
    returns how many words they hold. The same seed: every topic gets the same lines."""
    import random

    rng = random.Random(42)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    words = 0
    for index in range(count):
        length = rng.randint(1, 8)
        words += length
        line = " ".join(rng.choice(settings.WORDS) for _ in range(length))
        value = encode(line) if encode else line
        while True:
            try:
                producer.produce(topic, value=value, partition=index % settings.PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    return words


def input_topic(bootstrap: str, prefix: str, *, records: int) -> tuple[str, int]:
    """A new topic named after `prefix`, holding `records` lines: its name, and their words."""
    source = create_topic(bootstrap, f"{prefix}.{uuid.uuid4().hex[:8]}", settings.PARTITIONS)
    print(
        f"producing {records:,} lines into {source} ({settings.PARTITIONS} partitions) ...",
        flush=True,
    )
    return source, produce_lines(bootstrap, source, records)
