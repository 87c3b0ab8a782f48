"""Every metric the Grafana dashboard's queries name is served by a real operator or App driver.

Test plan:
- the session operator reconciles a Topic to Ready and a rival Topic of the same Kafka topic to
  Stalled (TopicConflict), and a resync pass counts them as managed;
- an App with a dead-letter topic runs in a real Spark driver (this process's session) over
  records of which one is malformed, to the end of its input, serving its metrics over HTTP;
- both /metrics pages are scraped as Prometheus would and read with Prometheus's text parser:
  every metric name in the dashboard's queries (panels and variables) is the name of a sample
  on one of them (a series with a value, not only a declared family); the difference, with
  the panels naming each missing metric, is empty.
(The same names held against the families the code declares, without I/O:
tests/unit/test_dashboard.py.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from rillet_devstack.operating import OperatorProcess
from tests.integration import runtime_helpers as rt

from . import dashboards, scraping
from .conftest import Kube
from .objects import apply, topic, wait_condition
from .polling import wait_for

pytestmark = pytest.mark.usefixtures("operator")


def operator_samples(
    kube: Kube, operator: OperatorProcess, namespace: str, kafka_prefix: str
) -> set[str]:
    """The sample names the operator serves once it reconciled a Topic to Ready, another to
    Stalled, and resynced both."""
    name = f"{kafka_prefix}-dashboard"
    apply(kube, topic(name, namespace))
    wait_condition(kube, "topic", name, namespace)
    apply(kube, topic(f"{name}-rival", namespace, topicName=name))  # younger: it loses
    wait_condition(
        kube,
        "topic",
        f"{name}-rival",
        namespace,
        condition_type="Stalled",
        reason="TopicConflict",
    )
    wait_for(
        lambda: scraping.metric(operator, "rillet_managed_topics", kind="topics") >= 2,
        timeout=30,
        what="a resync pass counting the Topics as managed",
    )
    return scraping.sample_names(scraping.scrape(operator))


def driver_samples(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path
) -> set[str]:
    """The sample names an App's driver serves once it read records (one malformed, so
    dead-lettered) to the end of its input."""
    documents = rt.load_manifests(rt.payments_filter(partitions=2))
    topics = rt.privatize(documents, kafka_prefix)
    rt.create_topics(
        kafka_admin,
        [NewTopic(t, 2 if name == "payments" else 1, 1) for name, t in topics.items()],
    )
    records = [(f"k{i}", json.dumps({"id": f"p{i}", "amount": i + 0.5})) for i in range(6)]
    rt.produce(kafka_bootstrap, topics["payments"], [*records, ("bad", "not json")], partitions=2)
    spec = rt.build_spec(documents, bootstrap=kafka_bootstrap, checkpoint=tmp_path / "ck")
    driver = rt.start_app(spec)
    port = driver.metrics.serve(host="127.0.0.1", port=0)
    try:
        try:
            rt.wait_to_end(driver, timeout=180)
        finally:
            driver.stop()  # waits for the listener: every batch is in the metrics then
        page = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    finally:
        driver.metrics.close()
    return scraping.sample_names(page)


def test_every_metric_the_dashboard_names_is_served(
    kube: Kube,
    operator: OperatorProcess,
    new_namespace: Callable[..., str],
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    served = operator_samples(kube, operator, new_namespace(), kafka_prefix)
    served |= driver_samples(kafka_admin, kafka_bootstrap, kafka_prefix, tmp_path)

    used = dashboards.used_metrics(dashboards.load())
    missing = {name: sorted(where) for name, where in used.items() if name not in served}

    assert used
    assert not missing, f"the dashboard names metrics nobody serves: {missing}"
