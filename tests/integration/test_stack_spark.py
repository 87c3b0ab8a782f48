"""PySpark reads Kafka through the connector the stack provisions.

Test plan:
- a Structured Streaming query with trigger availableNow over a Kafka topic counts exactly the
  records produced, per key (into a memory sink of a name of its own: the session is shared).
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from rillet_devstack.spark import local_session


def test_available_now_query_counts_every_record(
    kafka_admin: AdminClient, kafka_bootstrap: str, topic_name: str, tmp_path: Path
) -> None:
    kafka_admin.create_topics([NewTopic(topic_name, num_partitions=3, replication_factor=1)])[
        topic_name
    ].result(timeout=30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    words = [f"word{i % 17}" for i in range(5_000)]
    for word in words:
        producer.produce(topic_name, value=word)
    assert producer.flush(30) == 0

    spark = local_session("stack-test")
    sink = f"word_counts_{uuid.uuid4().hex[:8]}"
    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic_name)
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        stream.selectExpr("CAST(value AS STRING) AS word")
        .groupBy("word")
        .count()
        .writeStream.outputMode("complete")
        .format("memory")
        .queryName(sink)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        assert query.awaitTermination(timeout=300), "the availableNow query did not end in 300 s"
    finally:
        query.stop()
    assert query.exception() is None

    counted = {row["word"]: row["count"] for row in spark.sql(f"SELECT * FROM {sink}").collect()}
    assert counted == dict(Counter(words))
