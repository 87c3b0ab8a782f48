"""The driver's Prometheus metrics: per-partition offsets and lag, batch durations, rates.

Fed by the progress listener after every batch; served over HTTP when a port is given
(`rillet run --metrics-port`, or the operator's driver pod). Every series carries the App as the
`app` and `namespace` labels, so one scrape config serves all Apps.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from rillet.runtime.batches import progress

_BATCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class Metrics:
    """The metrics of one App's driver, in a registry of their own."""

    def __init__(self, *, app: str, namespace: str) -> None:
        self.registry = CollectorRegistry()
        self._labels = {"app": app, "namespace": namespace}
        app_labels = ["app", "namespace"]
        query_labels = [*app_labels, "query"]
        partition_labels = [*query_labels, "topic", "partition"]
        # Every metric in the App's own registry, not the process-wide default one.
        gauge = functools.partial(Gauge, registry=self.registry)
        counter = functools.partial(Counter, registry=self.registry)
        self.end_offset = gauge(
            "rillet_input_offset", "Next offset a query will read.", partition_labels
        )
        self.latest_offset = gauge(
            "rillet_input_latest_offset",
            "Latest offset of the partition when the batch started.",
            partition_labels,
        )
        self.lag = gauge(
            "rillet_input_lag_records",
            "Records of the partition not yet processed.",
            partition_labels,
        )
        self.committed = gauge(
            "rillet_consumer_group_offset",
            "Offset committed to the App's consumer group.",
            [*app_labels, "topic", "partition"],
        )
        self.batches = counter("rillet_batches", "Micro-batches finished.", query_labels)
        self.input_rows = counter("rillet_input_rows", "Records read.", query_labels)
        self.duration = Histogram(
            "rillet_batch_duration_seconds",
            "Duration of micro-batches.",
            query_labels,
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        )
        self.input_rate = gauge(
            "rillet_input_rows_per_second",
            "Records arriving per second (last batch).",
            query_labels,
        )
        self.processed_rate = gauge(
            "rillet_processed_rows_per_second",
            "Records processed per second (last batch).",
            query_labels,
        )
        self.late_rows = counter(
            "rillet_late_rows_dropped",
            "Rows a stateful operator dropped as later than the watermark.",
            query_labels,
        )
        self.observed = counter(
            "rillet_observed_rows",
            "Rows counted by the runtime inside queries (dead letters, rows without a key).",
            [*query_labels, "metric"],
        )
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def on_batch(self, batch: progress.BatchProgress) -> None:
        """Record a finished batch."""
        query = {**self._labels, "query": batch.query}
        self.batches.labels(**query).inc()
        self.input_rows.labels(**query).inc(batch.input_rows)
        self.duration.labels(**query).observe(batch.duration_seconds)
        self.late_rows.labels(**query).inc(batch.late_rows_dropped)
        self.input_rate.labels(**query).set(batch.input_rows_per_second)
        self.processed_rate.labels(**query).set(batch.processed_rows_per_second)
        for part in batch.partitions:
            labels = {**query, "topic": part.topic, "partition": str(part.partition)}
            self.end_offset.labels(**labels).set(part.end_offset)
            if part.latest_offset is not None and part.lag is not None:
                self.latest_offset.labels(**labels).set(part.latest_offset)
                self.lag.labels(**labels).set(part.lag)
        for name, counts in batch.observed.items():
            for metric, value in counts.items():
                self.observed.labels(**query, metric=f"{name}.{metric}").inc(float(value or 0))

    def on_commit(self, offsets: Mapping[progress.TopicPartition, int]) -> None:
        """Record offsets committed to the consumer group."""
        for (topic, partition), offset in offsets.items():
            self.committed.labels(**self._labels, topic=topic, partition=str(partition)).set(offset)

    def serve(self, *, host: str, port: int) -> int:
        """Serve /metrics on host:port (0: any free port); returns the port."""
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        return int(self._server.server_port)

    def close(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
