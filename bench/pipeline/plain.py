"""(b) the word count as a plain confluent-kafka loop in one Python process."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.pipeline import feeding, settings


def bench_plain(bootstrap: str, source: str, *, config: settings.Settings) -> float:
    """Records/s of consume -> count -> produce in one Python process."""
    table = feeding.create_topic(
        bootstrap,
        f"bench.plain.{uuid.uuid4().hex[:8]}",
        settings.PARTITIONS,
        **{"cleanup.policy": "compact"},
    )
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench.{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(source, p, 0) for p in range(settings.PARTITIONS)])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    counts: Counter[str] = Counter()
    seen, started = 0, None
    deadline = time.monotonic() + 600
    while seen < config.records and time.monotonic() < deadline:
        messages = consumer.consume(num_messages=10_000, timeout=1.0)
        if started is None and messages:
            started = time.monotonic()
        changed: set[str] = set()
        for message in messages:
            for word in settings.SPLIT.split((message.value() or b"").decode().lower()):
                if word:
                    counts[word] += 1
                    changed.add(word)
        for word in changed:
            producer.produce(
                table, key=word, value=json.dumps({"word": word, "count": counts[word]})
            )
        producer.poll(0)
        if messages:
            consumer.commit(asynchronous=True)
        seen += len(messages)
    producer.flush(60)
    elapsed = time.monotonic() - (started or time.monotonic())
    consumer.close()
    return seen / elapsed
