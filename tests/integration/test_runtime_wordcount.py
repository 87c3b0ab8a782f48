"""Word count into a Table on real Kafka and Spark: exact counts, compaction, offsets, read path.

Test plan:
- examples/wordcount.yaml over 100,000 lines in 8 partitions (several micro-batches): the Table
  holds exactly the ground-truth count of every word;
- after every batch, the App's consumer group `rillet.<namespace>.<app>` has committed exactly
  the offsets the batch processed, and at the end the topic's end offsets (no lag);
- the metrics endpoint reports the committed offsets and zero lag;
- once compacted, the Table topic holds one value per key, the latest;
- `rillet table get` prints a word's count, and fails for a word never seen.
"""

from __future__ import annotations

import json
import random
import re
import time
import urllib.request
from collections import Counter
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from rillet.runtime.batches import progress
from rillet.tables import tables
from tests.integration import runtime_helpers as rt
from tests.integration.polling import wait_for

LINES = 100_000
PARTITIONS = 8
VOCABULARY = [f"w{n}" for n in range(400)] + ["kafka", "spark", "rillet", "stream"]


def _lines(seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(VOCABULARY).capitalize() for _ in range(rng.randint(1, 6))) + "."
        for _ in range(LINES)
    ]


def _ground_truth(lines: list[str]) -> dict[str, int]:
    words = (w for line in lines for w in re.split("[^a-z0-9]+", line.lower()) if w)
    return dict(Counter(words))


def test_word_count_table_is_exact_compacts_and_commits_offsets(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path
) -> None:
    documents = rt.load_manifests(rt.EXAMPLES / "wordcount.yaml")
    topics = rt.privatize(
        documents, kafka_prefix, partitions={"sentences": PARTITIONS, "word-counts": PARTITIONS}
    )
    rt.create_topics(
        kafka_admin,
        [
            NewTopic(topics["sentences"], PARTITIONS, 1),
            NewTopic(
                topics["word-counts"],
                PARTITIONS,
                1,
                config={
                    "cleanup.policy": "compact",
                    "segment.ms": "1000",
                    "min.cleanable.dirty.ratio": "0.01",
                },
            ),
        ],
    )
    lines = _lines(seed=5)
    truth = _ground_truth(lines)
    rt.produce(
        kafka_bootstrap,
        topics["sentences"],
        ((None, line) for line in lines),
        partitions=PARTITIONS,
    )
    spec = rt.build_spec(
        documents,
        bootstrap=kafka_bootstrap,
        checkpoint=tmp_path / "checkpoint",
        max_offsets_per_trigger=LINES // 4,
    )
    assert spec.consumer_group == "rillet.default.wordcount"
    assert spec.shuffle_partitions == PARTITIONS

    after_batches: list[tuple[int, dict[progress.TopicPartition, int], dict[int, int]]] = []

    def check_group(batch: progress.BatchProgress) -> None:
        committed = rt.committed_offsets(
            kafka_bootstrap, spec.consumer_group, topics["sentences"], PARTITIONS
        )
        after_batches.append((batch.batch_id, batch.end_offsets, committed))

    driver = rt.start_app(spec, on_batch=[check_group])
    port = driver.metrics.serve(host="127.0.0.1", port=0)
    try:
        rt.wait_to_end(driver)
    finally:
        driver.stop()

    latest = tables.latest_per_key(rt.read_topic(kafka_bootstrap, topics["word-counts"]))
    counts = {key.decode(): value for key, value in _values(latest).items()}
    assert counts == truth

    assert len(after_batches) >= 4, "the input should take several micro-batches"
    for batch_id, processed, committed in after_batches:
        assert committed == {p: o for (_, p), o in processed.items()}, f"batch {batch_id}"
    assert after_batches[-1][2] == rt.end_offsets(kafka_bootstrap, topics["sentences"])

    scraped = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert _sum(scraped, "rillet_consumer_group_offset") == LINES
    assert _sum(scraped, "rillet_input_lag_records") == 0
    driver.metrics.close()

    _assert_compacts_to_latest(kafka_bootstrap, topics["word-counts"], truth)

    manifest = rt.write_manifests(documents, tmp_path / "wordcount.yaml")
    found = rt.cli(
        "table", "get", "word-counts", "kafka", "-b", kafka_bootstrap, "-f", str(manifest)
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == f'{{"word":"kafka","count":{truth["kafka"]}}}'
    absent = rt.cli(
        "table",
        "get",
        "word-counts",
        "nosuchword",
        "-b",
        kafka_bootstrap,
        "--topic",
        topics["word-counts"],
    )
    assert absent.returncode == 1
    assert "no key nosuchword" in absent.stderr


def _values(latest: dict[bytes, tables.Entry]) -> dict[bytes, int]:
    return {key: json.loads(entry.value or b"null")["count"] for key, entry in latest.items()}


def _sum(scraped: str, metric: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in scraped.splitlines()
        if line.startswith(metric + "{")
    )


def _assert_compacts_to_latest(bootstrap: str, topic: str, truth: dict[str, int]) -> None:
    """Roll every active segment (a marker record per partition), then wait for the cleaner.

    Kafka never compacts the active segment, so each probe appends a marker to every partition
    once segment.ms has passed; the markers (keys starting with "~roll") are the test's own.
    """
    started = time.monotonic()

    def compacted() -> bool:
        if time.monotonic() - started > 1.5:
            rt.produce(
                bootstrap,
                topic,
                ((f"~roll{p}", "") for p in range(PARTITIONS)),
                partitions=PARTITIONS,
            )
        entries = [
            e
            for e in rt.read_topic(bootstrap, topic)
            if e.key is not None and not e.key.startswith(b"~roll")
        ]
        keys = Counter(e.key for e in entries)
        return len(keys) == len(truth) and max(keys.values()) == 1

    wait_for(compacted, timeout=90, interval=2.0, what=f"{topic} compacted to one value per key")
