"""The driver's progress annotation: what it holds and how it is computed.

Test plan:
- a progress document gives each Kafka source's rate by its topics (non-Kafka sources none);
- the annotation is compact JSON with executors, lastBatchTime (RFC 3339 UTC, null before the
  first batch), rowsPerSecond, batches and applicationId, set by a metadata merge patch;
- rowsPerSecond: per topic the fastest query reading it (an input an output and its dead
  letters both read counts once), summed over topics; a query silent too long counts 0;
- the tally counts every batch of every query and remembers when the last one was seen;
- statePartitions: the most state partitions a stateful query reported (Spark's
  numShufflePartitions of its state operators), absent for a stateless App.
"""

from __future__ import annotations

import datetime
import json

from rillet.driverapi import reports
from rillet.runtime.batches import progress
from rillet.runtime.pod import reporting

T0 = datetime.datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)


def batch(
    query: str, rates: dict[str, float], state_partitions: int | None = None
) -> progress.BatchProgress:
    return progress.BatchProgress(
        query=query,
        batch_id=1,
        partitions=(),
        input_rows=0,
        input_rows_per_second=0.0,
        processed_rows_per_second=0.0,
        duration_seconds=0.1,
        late_rows_dropped=0,
        observed={},
        source_rates=rates,
        state_partitions=state_partitions,
    )


def test_source_rates_by_topic() -> None:
    rates = progress.source_rates(
        [
            {"endOffset": {"clicks": {"0": 5}}, "inputRowsPerSecond": 120.5},
            {"endOffset": '{"b": {"0": 1}, "a": {"0": 2}}', "inputRowsPerSecond": "NaN"},
            {"description": "RateStreamV2", "inputRowsPerSecond": 9.0},
        ]
    )
    assert rates == {"clicks": 120.5, "a,b": 0.0}


def test_parsed_progress_carries_source_rates() -> None:
    parsed = progress.parse_progress(
        {
            "name": "q",
            "batchId": 0,
            "sources": [{"endOffset": {"t": {"0": 5}}, "inputRowsPerSecond": 10.0}],
        }
    )
    assert parsed.source_rates == {"t": 10.0}


def test_the_annotation_value() -> None:
    report = reports.Progress(
        executors=3,
        last_batch_time=T0,
        rows_per_second=1520.54,
        batches=812,
        application_id="spark-5f0c",
    )

    assert report.to_json() == (
        '{"executors":3,"lastBatchTime":"2025-01-02T03:04:05Z","rowsPerSecond":1520.5,'
        '"batches":812,"applicationId":"spark-5f0c"}'
    )
    patch = reports.build_annotation_patch(report)
    assert json.loads(patch["metadata"]["annotations"]["rillet.io/progress"])["executors"] == 3


def test_before_the_first_batch_the_time_is_null() -> None:
    report = reports.Progress(
        executors=0, last_batch_time=None, rows_per_second=0.0, batches=0, application_id="a"
    )
    assert json.loads(report.to_json())["lastBatchTime"] is None
    assert '"rowsPerSecond":0.0' in report.to_json()


def test_times_are_utc() -> None:
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    moment = datetime.datetime(2025, 1, 2, 5, 4, 5, tzinfo=plus_two)
    assert reports.format_time(moment) == "2025-01-02T03:04:05Z"


def test_total_rate_counts_each_topic_once_and_drops_silent_queries() -> None:
    fresh, old = T0, T0 - datetime.timedelta(seconds=61)
    rates = {
        ("app.table-t", "orders"): reporting.SourceRate(rate=100.0, at=fresh),
        ("app.dead-letters-orders", "orders"): reporting.SourceRate(rate=90.0, at=fresh),
        ("app.topic-x", "clicks"): reporting.SourceRate(rate=50.0, at=fresh),
        ("app.topic-y", "views"): reporting.SourceRate(rate=70.0, at=old),
    }

    assert reporting.total_rate(rates, now=T0, fresh_seconds=60) == 150.0
    assert isinstance(reporting.total_rate({}, now=T0, fresh_seconds=60), float)


def test_the_tally_counts_batches_and_keeps_the_last_time() -> None:
    now = [T0]
    tally = reporting.BatchTally(clock=lambda: now[0], fresh_seconds=60)
    assert tally.report(executors=0, application_id="a").last_batch_time is None

    tally.on_batch(batch("app.table-t", {"orders": 100.0}))
    now[0] = T0 + datetime.timedelta(seconds=2)
    tally.on_batch(batch("app.dead-letters-orders", {"orders": 80.0}))
    report = tally.report(executors=2, application_id="spark-1")

    assert report == reports.Progress(
        executors=2,
        last_batch_time=now[0],
        rows_per_second=100.0,
        batches=2,
        application_id="spark-1",
    )
    now[0] = T0 + datetime.timedelta(seconds=90)
    assert tally.report(executors=2, application_id="spark-1").rows_per_second == 0.0


def test_state_partitions_come_from_the_state_operators_of_a_batch() -> None:
    parsed = progress.parse_progress(
        {
            "name": "q",
            "batchId": 3,
            "stateOperators": [
                {"operatorName": "stateStoreSave", "numShufflePartitions": 2},
                {"operatorName": "dedupe", "numShufflePartitions": 4},
            ],
        }
    )
    stateless = progress.parse_progress({"name": "q", "batchId": 3, "stateOperators": []})

    assert (parsed.state_partitions, stateless.state_partitions) == (4, None)


def test_the_annotation_says_the_most_state_partitions_of_the_stateful_queries() -> None:
    tally = reporting.BatchTally(clock=lambda: T0)
    tally.on_batch(batch("copy", {"t": 1.0}))
    assert "statePartitions" not in json.loads(
        tally.report(executors=1, application_id="a").to_json()
    )

    tally.on_batch(batch("counts", {"t": 1.0}, state_partitions=2))
    tally.on_batch(batch("totals", {"t": 1.0}, state_partitions=6))
    document = json.loads(tally.report(executors=1, application_id="a").to_json())

    assert document["statePartitions"] == 6
