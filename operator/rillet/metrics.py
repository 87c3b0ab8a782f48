"""Prometheus metrics of the operator (served on RILLET_METRICS_PORT)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

RECONCILES = Counter(
    "rillet_reconciles_total",
    "Reconciles by kind and result reason (Ready, a problem's reason, KafkaUnavailable, ...).",
    ["kind", "reason"],
)
RECONCILE_SECONDS = Histogram(
    "rillet_reconcile_duration_seconds",
    "Time of one object's reconcile, queueing included.",
    ["kind"],
)
RECONCILE_ERRORS = Counter(
    "rillet_reconcile_errors_total",
    "Reconciles that ended Stalled or unavailable.",
    ["kind", "reason"],
)
MANAGED_TOPICS = Gauge(
    "rillet_managed_topics", "Kafka topics managed (as of the last resync), by kind.", ["kind"]
)
QUEUE_DEPTH = Gauge("rillet_topic_queue_depth", "Topic reconciles waiting for a batch.")
BATCH_SECONDS = Histogram(
    "rillet_topic_batch_duration_seconds", "Time of one batch of admin calls."
)
RESYNCS = Counter("rillet_resyncs_total", "Completed passes of the periodic resync.")
RESYNC_SECONDS = Histogram(
    "rillet_resync_duration_seconds", "Time of one resync pass over every object."
)
LEADING = Gauge(
    "rillet_leader",
    "1 while this replica reconciles (it holds the Lease, or runs without leader election), 0 "
    "while it stands by.",
)
