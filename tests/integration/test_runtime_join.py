"""Stream-table join and the Table read path, with examples/enrich-orders.yaml.

Test plan:
- `customers-loader` upserts customer records into the global Table `customers`: the latest
  record per customer wins, and `rillet table get customers <id>` prints it;
- `enrich-orders` joins each order with the customer's latest record (a left join: an unknown
  customer gives NULL columns), both ways an App can: the example as it is (`lookups`), and the
  same App with the join written in its SQL (LEFT JOIN with the Table's view);
- while `enrich-orders` runs, a customer changes: orders after the change see the new record
  (the Table is read as it is at each micro-batch);
- a Python pipeline returning several named results feeds one output each (`from`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration import runtime_helpers as rt
from tests.integration.polling import wait_for


def _customer(customer_id: str, name: str, tier: str) -> tuple[str, str]:
    return customer_id, json.dumps({"customer_id": customer_id, "name": name, "tier": tier})


def _order(order_id: str, customer_id: str, amount: str) -> tuple[str, str]:
    return order_id, json.dumps(
        {
            "order_id": order_id,
            "customer_id": customer_id,
            "amount": amount,
            "ts": "2024-05-01T10:00:00Z",
        }
    )


SQL_JOIN = """
SELECT o.order_id, o.customer_id, o.amount, o.ts,
       c.name AS customer_name, c.tier AS customer_tier
FROM orders o
LEFT JOIN customers c ON o.customer_id = c.customer_id
"""


def _joined_in_sql(documents: list[dict[str, Any]]) -> None:
    """enrich-orders with the join in its SQL instead of its `lookups`."""
    [app] = [d for d in documents if d["metadata"]["name"] == "enrich-orders"]
    del app["spec"]["inputs"][0]["lookups"]
    app["spec"]["pipeline"]["sql"] = SQL_JOIN


@pytest.mark.parametrize("way", ["lookups", "sql-join"])
def test_orders_are_enriched_with_the_latest_customer_record(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path, way: str
) -> None:
    documents = rt.load_manifests(rt.EXAMPLES / "enrich-orders.yaml")
    if way == "sql-join":
        _joined_in_sql(documents)
    topics = rt.privatize(documents, kafka_prefix)
    rt.create_topics(
        kafka_admin,
        [
            NewTopic(topics["orders"], 2, 1),
            NewTopic(topics["customer-updates"], 1, 1, config={"cleanup.policy": "compact"}),
            NewTopic(topics["orders-enriched"], 2, 1),
            NewTopic(topics["orders-dlq"], 1, 1),
            NewTopic(topics["customers"], 1, 1, config={"cleanup.policy": "compact"}),
        ],
    )
    manifest = rt.write_manifests(documents, tmp_path / "enrich-orders.yaml")

    def load_customers(*updates: tuple[str, str]) -> None:
        rt.produce(kafka_bootstrap, topics["customer-updates"], updates)
        rt.run_app(
            rt.build_spec(
                documents,
                bootstrap=kafka_bootstrap,
                app="customers-loader",
                checkpoint=tmp_path / "loader",
            )
        )

    load_customers(
        _customer("c1", "Ada", "gold"),
        _customer("c2", "Bob", "silver"),
        _customer("c1", "Ada L.", "platinum"),
    )
    got = rt.cli("table", "get", "customers", "c1", "-b", kafka_bootstrap, "-f", str(manifest))
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == {"customer_id": "c1", "name": "Ada L.", "tier": "platinum"}

    enrich = rt.build_spec(
        documents,
        bootstrap=kafka_bootstrap,
        app="enrich-orders",
        checkpoint=tmp_path / "enrich",
        available_now=False,
    )

    def enriched() -> dict[str, dict[str, Any]]:
        values = rt.json_values(rt.read_topic(kafka_bootstrap, topics["orders-enriched"]))
        return {v["order_id"]: v for v in values}

    with rt.running(enrich) as driver:
        rt.produce(
            kafka_bootstrap,
            topics["orders"],
            [
                _order("o1", "c1", "10.50"),
                _order("o2", "c2", "3"),
                _order("o3", "c9", "7.25"),
            ],
        )
        wait_for(lambda: len(enriched()) == 3, timeout=120, what="three enriched orders")
        load_customers(_customer("c2", "Bob", "gold"))
        rt.produce(kafka_bootstrap, topics["orders"], [_order("o4", "c2", "99.99")])
        wait_for(lambda: "o4" in enriched(), timeout=60, what="the order after the update")
        assert driver.failure() is None

    found = enriched()
    assert found["o1"] == {
        "order_id": "o1",
        "customer_id": "c1",
        "amount": 10.5,
        "ts": "2024-05-01T10:00:00.000Z",
        "customer_name": "Ada L.",
        "customer_tier": "platinum",
    }
    assert (found["o2"]["customer_name"], found["o2"]["customer_tier"]) == ("Bob", "silver")
    assert (found["o3"]["customer_name"], found["o3"]["customer_tier"]) == (None, None)
    assert found["o4"]["customer_tier"] == "gold"


SPLIT = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: orders}
spec: {partitions: 1}
---
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: large-orders}
spec: {partitions: 1}
---
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: small-orders}
spec: {partitions: 1}
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {name: split-orders}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - name: orders
      topicRef: {name: orders}
      schema: "order_id STRING, customer_id STRING, amount DECIMAL(12,2)"
      startingOffsets: earliest
  pipeline:
    python: {entrypoint: "tests.integration.runtime_pipelines:split_orders"}
  outputs:
    - topicRef: {name: large-orders}
      from: large
      keyColumns: [order_id]
      valueColumns: [order_id, amount]
    - topicRef: {name: small-orders}
      from: small
"""


def test_python_pipeline_results_feed_the_outputs_that_name_them(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path
) -> None:
    documents = rt.load_manifests(SPLIT)
    topics = rt.privatize(documents, kafka_prefix)
    rt.create_topics(kafka_admin, [NewTopic(t, 1, 1) for t in topics.values()])
    rt.produce(
        kafka_bootstrap,
        topics["orders"],
        [
            _order("o1", "c1", "150"),
            _order("o2", "c1", "20"),
            _order("o3", "c2", "100"),
        ],
    )

    rt.run_app(rt.build_spec(documents, bootstrap=kafka_bootstrap, checkpoint=tmp_path / "ck"))

    large = rt.read_topic(kafka_bootstrap, topics["large-orders"])
    assert {(e.key, e.value) for e in large} == {
        (b"o1", b'{"order_id":"o1","amount":150.00}'),
        (b"o3", b'{"order_id":"o3","amount":100.00}'),
    }
    small = rt.read_topic(kafka_bootstrap, topics["small-orders"])
    assert [e.key for e in small] == [None]  # no keyColumns: records without a key
    value = json.loads(small[0].value or b"")
    # No valueColumns: every column of the view, record metadata included.
    assert value.keys() == {"order_id", "customer_id", "amount", "timestamp", "partition", "offset"}
    assert (value["order_id"], value["amount"], value["partition"], value["offset"]) == (
        "o2",
        20.0,
        0,
        1,
    )
