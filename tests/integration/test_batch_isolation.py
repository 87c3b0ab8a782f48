"""One object the Kafka client or Kafka refuses never fails the others of its batch.

The operator syncs topics in batches: one create, one create-partitions, one alter-configs call
for everything queued within 50 ms. librdkafka refuses a whole request over one topic it cannot
send, so one such object used to fail its batch (`topic batch failed`): every object in it got
InternalError, and the resync, which batches all settled objects, kept failing them all.

Test plan (the session operator; each claim checked in Kafka):
- one kubectl apply with valid Topics and a Table, a Topic and a Table with 2147483647
  partitions (int32: the CRD takes it; the Kafka client refuses past 100,000), and a Topic
  whose config Kafka refuses (segment.bytes 1): the valid ones are Ready, in Kafka as
  declared; the bad ones are Stalled with a CamelCase reason (InvalidPartitions from the client,
  InvalidConfig from Kafka) and a message saying what to do, and no topic is made for them;
- a Ready Topic raised to 200000 partitions with a config change in the same update, applied
  with a new valid Topic: it is Stalled (InvalidPartitions, "cannot add partitions"), its
  partitions in Kafka stay, its config change reaches Kafka all the same, the new Topic is Ready;
- all of that holds over two more resync passes (the resync batches every settled object
  together), and the operator never logs `topic batch failed`.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from rillet_devstack.operating import OperatorProcess

from .conftest import Kube
from .kafka_reads import kafka_overrides, kafka_partitions
from .objects import apply, condition, get, table, topic, wait_condition
from .polling import wait_for
from .scraping import metric

pytestmark = pytest.mark.usefixtures("operator")

CAMEL_CASE = re.compile(r"[A-Z][a-z]+(?:[A-Z][a-z]+)+")
INT32_MAX = 2**31 - 1


def _stalled(kube: Kube, kind: str, name: str, namespace: str, reason: str) -> dict[str, Any]:
    obj = wait_condition(kube, kind, name, namespace, condition_type="Stalled", reason=reason)
    stalled = condition(obj, "Stalled")
    assert CAMEL_CASE.fullmatch(stalled["reason"])
    assert condition(obj, "Ready")["status"] == "False"
    return stalled


def _resync_passes(operator: OperatorProcess, passes: int) -> None:
    """Wait until the operator completed `passes` more resync passes (every 3 s)."""
    start = metric(operator, "rillet_resyncs_total")
    wait_for(
        lambda: metric(operator, "rillet_resyncs_total") >= start + passes,
        timeout=30,
        what=f"{passes} resync passes",
    )


def test_objects_kafka_cannot_take_fail_alone_in_their_batch(
    kube: Kube,
    namespace: str,
    kafka_admin: AdminClient,
    kafka_prefix: str,
    operator: OperatorProcess,
) -> None:
    log_start = len(operator.log_text())
    good = [f"{kafka_prefix}-good-{i}" for i in range(6)]
    good_table = f"{kafka_prefix}-good-table"
    huge, huge_table = f"{kafka_prefix}-huge", f"{kafka_prefix}-huge-table"
    refused = f"{kafka_prefix}-refused"
    apply(
        kube,
        *(topic(name, namespace, partitions=2) for name in good[:3]),
        topic(huge, namespace, partitions=INT32_MAX, config={"retention.ms": 60_000}),
        table(good_table, namespace, partitions=2),
        table(huge_table, namespace, partitions=INT32_MAX),
        topic(refused, namespace, config={"segment.bytes": 1}),
        *(topic(name, namespace, partitions=2) for name in good[3:]),
    )

    for name in good:
        wait_condition(kube, "topic", name, namespace)
        assert kafka_partitions(kafka_admin, name) == 2
    wait_condition(kube, "table", good_table, namespace)
    assert kafka_overrides(kafka_admin, good_table) == {"cleanup.policy": "compact"}
    for kind, name in (("topic", huge), ("table", huge_table)):
        stalled = _stalled(kube, kind, name, namespace, "InvalidPartitions")
        assert stalled["message"] == (
            f"the Kafka client cannot create topic {name}: {INT32_MAX} partitions is outside "
            "what the Kafka client can ask for (1 to 100000): set spec.partitions within it"
        )
        assert kafka_partitions(kafka_admin, name) is None
    stalled = _stalled(kube, "topic", refused, namespace, "InvalidConfig")
    assert f"Kafka refused to create topic {refused}" in stalled["message"]
    assert kafka_partitions(kafka_admin, refused) is None

    grown, fresh = good[0], f"{kafka_prefix}-fresh"
    apply(
        kube,
        topic(grown, namespace, partitions=200_000, config={"retention.ms": 120_000}),
        topic(fresh, namespace, partitions=1),
    )

    stalled = _stalled(kube, "topic", grown, namespace, "InvalidPartitions")
    assert stalled["message"].startswith(f"the Kafka client cannot add partitions to topic {grown}")
    assert kafka_partitions(kafka_admin, grown) == 2
    assert kafka_overrides(kafka_admin, grown) == {"retention.ms": "120000"}
    wait_condition(kube, "topic", fresh, namespace)

    _resync_passes(operator, 2)
    for name in [*good[1:], fresh]:
        assert condition(get(kube, "topic", name, namespace), "Ready")["status"] == "True", name
    assert condition(get(kube, "table", good_table, namespace), "Ready")["status"] == "True"
    assert condition(get(kube, "topic", huge, namespace), "Stalled")["reason"] == (
        "InvalidPartitions"
    )
    assert "topic batch failed" not in operator.log_text()[log_start:]
