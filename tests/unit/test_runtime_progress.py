"""Progress of finished micro-batches: offsets, lag, rates, and offsets to commit.

Test plan:
- a progress document (as Spark writes it) gives per-partition end and latest offsets, lag,
  rates (NaN as 0), batch duration, rows dropped by the watermark, observed metrics;
- the group gets, per partition, the least offset every query reading the topic processed, only
  once they have all reported, and only advances;
- a query's first report shows which topics it reads; until then it counts for every topic.
"""

from __future__ import annotations

from typing import Any

from rillet.runtime.batches import progress

DOCUMENT: dict[str, Any] = {
    "id": "3f0c",
    "runId": "9a1b",
    "name": "wordcount.table-word-counts",
    "batchId": 7,
    "numInputRows": 1200,
    "inputRowsPerSecond": "NaN",
    "processedRowsPerSecond": 2400.5,
    "durationMs": {"addBatch": 400, "triggerExecution": 500},
    "stateOperators": [{"numRowsTotal": 10, "numRowsDroppedByWatermark": 2}],
    "sources": [
        {
            "description": "KafkaV2[Subscribe[sentences]]",
            "startOffset": {"sentences": {"0": 100, "1": 50}},
            "endOffset": {"sentences": {"0": 700, "1": 650}},
            "latestOffset": {"sentences": {"0": 900, "1": 650}},
            "numInputRows": 1200,
        }
    ],
    "sink": {"description": "ForeachBatchSink"},
    "observedMetrics": {"dead_letters_x": {"rows": 3}},
}


def test_progress_document_parses_offsets_lag_and_rates() -> None:
    batch = progress.parse_progress(DOCUMENT)

    assert (batch.query, batch.batch_id, batch.input_rows) == (
        "wordcount.table-word-counts",
        7,
        1200,
    )
    assert batch.end_offsets == {("sentences", 0): 700, ("sentences", 1): 650}
    assert [p.lag for p in batch.partitions] == [200, 0]
    assert (batch.input_rows_per_second, batch.processed_rows_per_second) == (0.0, 2400.5)
    assert batch.duration_seconds == 0.5
    assert batch.late_rows_dropped == 2
    assert batch.observed == {"dead_letters_x": {"rows": 3}}


def test_offsets_given_as_json_text_and_non_kafka_sources() -> None:
    source = {"endOffset": '{"t": {"0": 5}}', "latestOffset": None}

    (part,) = progress.parse_partitions(source)

    assert (part.topic, part.partition, part.end_offset, part.lag) == ("t", 0, 5, None)
    assert progress.parse_partitions({"endOffset": "12"}) == []  # e.g. the rate source


def test_commit_waits_for_every_reader_and_takes_the_least_offset() -> None:
    readers = {"t": frozenset({"out", "dlq"})}
    first = {"out": {("t", 0): 10, ("t", 1): 4}}

    assert progress.plan_commit(readers=readers, reported=first, committed={}) == {}

    both = {**first, "dlq": {("t", 0): 8, ("t", 1): 6}}
    assert progress.plan_commit(readers=readers, reported=both, committed={}) == {
        ("t", 0): 8,
        ("t", 1): 4,
    }
    assert progress.plan_commit(readers=readers, reported=both, committed={("t", 0): 8}) == {
        ("t", 1): 4,
    }


def test_first_report_narrows_the_topics_a_query_reads() -> None:
    readers = progress.initial_readers(topics=["a", "b"], queries=["q1", "q2"])
    batch = progress.parse_progress(
        {
            **DOCUMENT,
            "name": "q1",
            "sources": [
                {"endOffset": {"a": {"0": 3}}},
            ],
        }
    )

    narrowed = progress.narrow_readers(readers, batch)

    assert narrowed == {"a": frozenset({"q1", "q2"}), "b": frozenset({"q2"})}
