"""Windowed Tables: tumbling (SQL) and hopping (Python) windows with late data.

Test plan (events of page "a", times after 2024-01-01T00:00, lateness allowed 30 s):
- first 00:10, 00:20, 00:50, 01:05, 01:40: the watermark becomes 01:10;
- then, late, 00:30 or 00:05 (its windows ended before the watermark: dropped, and counted as
  dropped in the batch progress) and 01:20 (late but inside the watermark: counted);
- the windowed Table holds one count per page and window, the window in the key;
- `rillet table get` with part of a JSON key lists every window of the page.
The tumbling App declares its lateness in the App (`eventTime`, no watermark in its SQL), the
hopping one in its Python function (`withWatermark`): both behave the same. An `eventTime`
column that is not a TIMESTAMP stops the App at start, naming the column and its type.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from rillet.runtime.batches import progress
from rillet.tables import tables
from tests.integration import runtime_helpers as rt
from tests.integration.polling import wait_for

START = datetime(2024, 1, 1, tzinfo=UTC)

TUMBLING = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: clicks}
spec: {partitions: 1}
---
apiVersion: rillet.io/v1alpha1
kind: Table
metadata: {name: page-views}
spec:
  keyFormat: json
  valueSchema: "page STRING, window_start TIMESTAMP, window_end TIMESTAMP, views BIGINT"
  window: {type: tumbling, size: 1m, expiry: 90s}
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {name: clicks-per-minute}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - name: clicks
      topicRef: {name: clicks}
      schema: "page STRING, ts TIMESTAMP"
      startingOffsets: earliest
      eventTime: {column: ts, allowedLateness: 30s}
  pipeline:
    sql: |
      SELECT page, window.start AS window_start, window.end AS window_end, count(*) AS views
      FROM clicks
      GROUP BY page, window(ts, '1 minute')
  outputs:
    - tableRef: {name: page-views}
      keyColumns: [page, window_start]
"""

HOPPING = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: clicks}
spec: {partitions: 1}
---
apiVersion: rillet.io/v1alpha1
kind: Table
metadata: {name: page-views-hopping}
spec:
  keyFormat: json
  window: {type: hopping, size: 1m, step: 30s, expiry: 90s}
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {name: clicks-hopping}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - name: clicks
      topicRef: {name: clicks}
      schema: "page STRING, ts TIMESTAMP"
      startingOffsets: earliest
  pipeline:
    python:
      entrypoint: tests.integration.runtime_pipelines:hopping_views
  outputs:
    - tableRef: {name: page-views-hopping}
      keyColumns: [page]
"""


def _at(seconds: int) -> str:
    return (START + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _clicks(*seconds: int) -> list[tuple[str, str]]:
    return [("a", json.dumps({"page": "a", "ts": _at(s)})) for s in seconds]


def _run_with_late_data(
    manifest: str,
    table: str,
    kafka_admin: AdminClient,
    bootstrap: str,
    prefix: str,
    checkpoint: Path,
    *,
    late: int,
    on_time_windows: int,
) -> tuple[dict[str, Any], list[progress.BatchProgress], list[dict[str, Any]], dict[str, str]]:
    """Run the App on the first clicks, then on late ones; the Table by key, and the batches."""
    documents = rt.load_manifests(manifest)
    topics = rt.privatize(documents, prefix)
    rt.create_topics(
        kafka_admin,
        [
            NewTopic(topics["clicks"], 1, 1),
            NewTopic(topics[table], 1, 1, config={"cleanup.policy": "compact,delete"}),
        ],
    )
    spec = rt.build_spec(documents, bootstrap=bootstrap, checkpoint=checkpoint, available_now=False)
    batches: list[progress.BatchProgress] = []

    def windows() -> dict[str, Any]:
        latest = tables.latest_per_key(rt.read_topic(bootstrap, topics[table]))
        return {k.decode(): json.loads(e.value or b"null") for k, e in latest.items()}

    with rt.running(spec, on_batch=[batches.append]) as driver:
        rt.produce(bootstrap, topics["clicks"], _clicks(10, 20, 50, 65, 100))
        # The Table shows the on-time windows once the batch holding 01:40 is written: the
        # watermark (01:10) computed from it applies to every later batch, the late one too.
        wait_for(lambda: len(windows()) == on_time_windows, timeout=120, what="on-time windows")
        rt.produce(bootstrap, topics["clicks"], _clicks(late, 80))
        wait_for(
            lambda: sum(b.late_rows_dropped for b in batches) > 0,
            timeout=60,
            what="the record beyond the watermark to be dropped",
        )
        wait_for(lambda: sum(b.input_rows for b in batches) == 7, timeout=60, what="all clicks")
        assert driver.failure() is None
    return windows(), batches, documents, topics


def test_tumbling_windows_count_late_data_inside_the_watermark_only(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path
) -> None:
    found, _, documents, topics = _run_with_late_data(
        TUMBLING,
        "page-views",
        kafka_admin,
        kafka_bootstrap,
        kafka_prefix,
        tmp_path / "ck",
        late=30,
        on_time_windows=2,
    )

    def key(start: int) -> str:
        return json.dumps({"page": "a", "window_start": _at(start)}, separators=(",", ":"))

    assert found == {
        key(0): {"page": "a", "window_start": _at(0), "window_end": _at(60), "views": 3},
        key(60): {"page": "a", "window_start": _at(60), "window_end": _at(120), "views": 3},
    }

    manifest = rt.write_manifests(documents, tmp_path / "clicks.yaml")
    listed = rt.cli(
        "table", "get", "page-views", '{"page": "a"}', "-b", kafka_bootstrap, "-f", str(manifest)
    )
    assert listed.returncode == 0, listed.stderr
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == [key(0), key(60)]
    one = rt.cli(
        "table",
        "get",
        "page-views",
        key(60),
        "-b",
        kafka_bootstrap,
        "--topic",
        topics["page-views"],
        "--key-format",
        "json",
    )
    assert json.loads(one.stdout)["views"] == 3


def test_hopping_windows_put_the_window_in_the_key_and_drop_data_beyond_the_watermark(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path
) -> None:
    found, _, _, _ = _run_with_late_data(
        HOPPING,
        "page-views-hopping",
        kafka_admin,
        kafka_bootstrap,
        kafka_prefix,
        tmp_path / "ck",
        late=5,
        on_time_windows=5,
    )

    views = {(json.loads(k)["window"]["start"], v["views"]) for k, v in found.items()}
    assert views == {
        (_at(-30), 2),  # 00:10, 00:20 (00:05 came after the window closed)
        (_at(0), 3),  # 00:10, 00:20, 00:50
        (_at(30), 3),  # 00:50, 01:05, and the late 01:20
        (_at(60), 3),  # 01:05, 01:40, and the late 01:20
        (_at(90), 1),  # 01:40
    }
    assert all(json.loads(k) == {"page": "a", "window": v["window"]} for k, v in found.items())


def test_an_event_time_column_that_is_not_a_timestamp_stops_the_app_at_start(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path
) -> None:
    documents = rt.load_manifests(TUMBLING.replace("column: ts", "column: page"))
    topics = rt.privatize(documents, kafka_prefix)
    rt.create_topics(kafka_admin, [NewTopic(topics["clicks"], 1, 1)])
    spec = rt.build_spec(documents, bootstrap=kafka_bootstrap, checkpoint=tmp_path / "ck")

    with pytest.raises(
        ValueError,
        match=r"^input clicks: eventTime\.column page is string of its view: name a TIMESTAMP",
    ):
        rt.start_app(spec)
