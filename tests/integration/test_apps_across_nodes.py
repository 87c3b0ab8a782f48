"""One App across two nodes, its checkpoint in the object store, and each of its nodes lost.

The stack has two worker nodes (`rillet dev up --nodes 2`) and SeaweedFS (`--object-store`).
The App counts words into a Table and copies every input record, keyed by its (partition,
offset), to an ExactlyOnce Topic: the Table must equal the counts the test computes, and a
read_committed reader must find each input record in the copy exactly once. One App (one Spark
start) serves the whole story, in order:

- **Across nodes.** Node 2 is cordoned until the driver is bound (so the driver is on node 1),
  then opened: its executors (4 at least, up to the cap of 6: its maximum is 8) spread over both
  nodes (their pods' `nodeName`), and the App's status counts them by node. Its checkpoint is in
  the bucket (listed with the store's own client), and the access key is in no ConfigMap, pod
  spec, status, Event or log.
- **An executor's node lost.** Node 2 is stopped as a crash would stop it, mid-stream. The loss
  is in the status (executors.lost) and an Event (ExecutorsLost); the lost executors are replaced
  on node 1, never past the cap, and the App goes on there. The Table is exact and the copy has
  no duplicate and no gap.
- **The driver's node lost.** The driver is moved to node 2 (node 1 cordoned, driver pod deleted),
  and node 2 is stopped. The App says DriverNodeLost, naming the taint; the test then taints the
  node out-of-service, as an administrator or a node-repair automation would, and the driver comes
  back on node 1 from the object-store checkpoint. The seconds from the loss to its first
  committed batch are printed. The Table is exact and the copy has no duplicate and no gap.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from rillet.driverapi import reports
from rillet_devstack import stack as devstack
from rillet_devstack.operating import OperatorProcess

from . import nodes, test_stack_objectstore
from .conftest import Kube
from .objects import apply, condition, get, table, topic, wait_condition, wait_event
from .polling import wait_for
from .runtime_helpers import copied_positions, end_offsets
from .wordcounts import (
    C1_ONLY,
    SMALL,
    produce_lines,
    running,
    table_counts,
    wait_table,
)

pytestmark = pytest.mark.usefixtures("operator", "two_nodes")

NODE_1, NODE_2 = nodes.NODE_1, nodes.NODE_2
PARTITIONS = 6
EXECUTORS = 4  # the least the App runs; the lag may ask for up to the cap
PAST_THE_CAP = 8
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
SQL = """
CREATE OR REPLACE TEMPORARY VIEW copied AS SELECT partition, offset, value FROM lines;
SELECT word, count(*) AS count
FROM (SELECT explode(split(lower(value), '[^a-z0-9]+')) AS word FROM lines)
WHERE word != ''
GROUP BY word
"""


def across_nodes(
    prefix: str, namespace: str, *, image: str, bucket: str, endpoint: str, secret: str
) -> list[dict[str, Any]]:
    """The input Topic, the Table of counts, the copy Topic, and the App between them."""
    app = f"{prefix}-wc"
    return [
        topic(f"{prefix}-lines", namespace, partitions=PARTITIONS, deletionPolicy="Delete"),
        topic(f"{prefix}-copies", namespace, partitions=PARTITIONS, deletionPolicy="Delete"),
        table(
            f"{prefix}-counts",
            namespace,
            keyFormat="string",
            valueSchema="word STRING, count BIGINT",
            deletionPolicy="Delete",
        ),
        {
            "apiVersion": "rillet.io/v1alpha1",
            "kind": "App",
            "metadata": {"name": app, "namespace": namespace},
            "spec": {
                "image": image,
                "inputs": [
                    {
                        "name": "lines",
                        "topicRef": {"name": f"{prefix}-lines"},
                        "format": "string",
                        "startingOffsets": "earliest",
                        # Several batches per burst of lines, so that each node loss lands
                        # among them; no more (each batch commits its state to the bucket).
                        "maxOffsetsPerTrigger": 20_000,
                    }
                ],
                "pipeline": {"sql": SQL},
                "outputs": [
                    {"tableRef": {"name": f"{prefix}-counts"}, "keyColumns": ["word"]},
                    {
                        "topicRef": {"name": f"{prefix}-copies"},
                        "from": "copied",
                        "keyColumns": ["partition", "offset"],
                        "valueColumns": ["value"],
                        "delivery": "ExactlyOnce",
                    },
                ],
                # Past the cap (6 partitions, 1 core each): the cap, not the maximum, must hold.
                "scaling": {"minExecutors": EXECUTORS, "maxExecutors": PAST_THE_CAP},
                "checkpoint": {
                    "location": f"s3a://{bucket}/{namespace}/{app}",
                    "endpoint": endpoint,
                    "secretRef": {"name": secret},
                },
                "driver": SMALL,
                "executor": SMALL,
                "sparkConf": C1_ONLY,
            },
        },
    ]


def _exactly_once(bootstrap: str, lines: str, copies: str) -> None:
    """Every input record is in the copy once (read_committed): no duplicate, no gap."""
    ends = end_offsets(bootstrap, lines)
    expected = {(p, o) for p, end in ends.items() for o in range(end)}

    def complete() -> bool:
        return set(copied_positions(bootstrap, copies)) == expected

    wait_for(complete, timeout=300, interval=5, what=f"every record of {lines} copied")
    copied = copied_positions(bootstrap, copies)
    duplicated = {k: n for k, n in copied.items() if n > 1}
    assert not duplicated, f"{len(duplicated)} records copied twice, e.g. {list(duplicated)[:5]}"
    assert set(copied) == expected


def _table_is(bootstrap: str, topic_name: str, truth: Counter[str]) -> bool:
    try:
        return table_counts(bootstrap, topic_name) == dict(truth)
    except LookupError:  # the Table's topic not made yet
        return False


def _batches(kube: Kube, namespace: str) -> int:
    """Batches the App's driver reported (its progress annotation), 0 before the first."""
    found = running(kube, namespace, "driver")
    if not found:
        return 0
    return reports.read_progress(found[0]).batches or 0


def _last_batch_after(
    kube: Kube, namespace: str, app: str, moment: datetime
) -> Callable[[], datetime | None]:
    def probe() -> datetime | None:
        stamp = (get(kube, "app", app, namespace).get("status") or {}).get("lastBatchTime")
        at = datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None
        return at if at and at > moment else None

    return probe


def _secret_nowhere(
    kube: Kube, namespace: str, app: str, secret_value: str, operator: OperatorProcess
) -> None:
    """The access key is in no ConfigMap, pod spec, App status, Event, pod log or the
    operator's log."""
    assert secret_value not in operator.log.read_text(errors="replace"), "in the operator's log"
    places: dict[str, Any] = {
        "configmaps": kube.api.list("configmap", namespace),
        "pods": kube.api.list("pod", namespace),
        "app": get(kube, "app", app, namespace),
        "events": kube.api.list("event", namespace),
    }
    for place, found in places.items():
        assert secret_value not in json.dumps(found), f"the access key is in {place}"
    for pod in places["pods"]:
        name = pod["metadata"]["name"]
        logs = kube.kubectl("logs", "-n", namespace, name, "--all-containers", check=False)
        assert secret_value not in logs.stdout, f"the access key is in the log of {name}"


@pytest.fixture(scope="module")
def two_nodes(stack: devstack.StackState, runtime_image: str) -> devstack.StackState:
    """The shared stack with two nodes (the runtime image: in the node's xdist group)."""
    return nodes.grow_to_two()


@pytest.fixture
def across_app(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    runtime_image: str,
    stack: devstack.StackState,
) -> Iterator[dict[str, str]]:
    """The App applied with its driver on node 1 and its executors free to use both nodes."""
    env = stack.environment()
    secret = get(kube, "secret", "rillet-objectstore", "default")
    copy = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "objectstore", "namespace": namespace},
        "data": secret["data"],
    }
    apply(kube, copy)
    documents = across_nodes(
        kafka_prefix,
        namespace,
        image=runtime_image,
        bucket=env["RILLET_S3_BUCKET"],
        endpoint=env["RILLET_S3_ENDPOINT"],
        secret="objectstore",
    )
    with nodes.cordoned(kube, NODE_2):
        apply(kube, *documents)
        wait_for(lambda: nodes.driver_node(kube, namespace), timeout=240, what="the driver Running")
    names = {
        "app": f"{kafka_prefix}-wc",
        "lines": f"{kafka_prefix}-lines",
        "copies": f"{kafka_prefix}-copies",
        "counts": f"{kafka_prefix}-counts",
        "bucket": env["RILLET_S3_BUCKET"],
    }
    yield names
    for node in (NODE_1, NODE_2):
        kube.kubectl("taint", "node", node, f"{OUT_OF_SERVICE}-", check=False)
        kube.kubectl("uncordon", node, check=False)
    if not nodes.node_ready(kube, NODE_2):
        nodes.start(NODE_2)


def _spread_over_both_nodes(
    kube: Kube, namespace: str, stack: devstack.StackState, names: Mapping[str, str]
) -> None:
    app = names["app"]
    wait_for(
        lambda: set(nodes.executor_nodes(kube, namespace)) == {NODE_1, NODE_2},
        timeout=240,
        what=f"executors running on both {NODE_1} and {NODE_2}",
    )
    print(
        f"across nodes: driver on {nodes.driver_node(kube, namespace)}, "
        f"executors {dict(nodes.executor_nodes(kube, namespace))}"
    )

    def counted_by_node() -> bool:
        status = get(kube, "app", app, namespace).get("status") or {}
        nodes = (status.get("executors") or {}).get("nodes") or []
        return {n["name"] for n in nodes} == {NODE_1, NODE_2}

    wait_for(counted_by_node, timeout=60, what="the App's status counting executors by node")
    # Nothing holds the driver to a node: a remote checkpoint claims no volume.
    stateful_set = get(kube, "statefulset", f"{app}-driver", namespace)
    assert "volumeClaimTemplates" not in stateful_set["spec"]


def _in_the_bucket(stack: devstack.StackState, names: Mapping[str, str], namespace: str) -> None:
    """The checkpoint's offsets and commits are objects of the bucket (listed by S3 itself)."""
    prefix = f"{namespace}/{names['app']}/"
    listed = test_stack_objectstore.env_client(stack.environment()).list_objects(
        names["bucket"], prefix=prefix, recursive=True
    )
    keys = [str(o.object_name) for o in listed]
    for part in ("/offsets/", "/commits/", "/state/"):
        assert any(part in key for key in keys), (part, keys[:20])


def _lose_an_executors_node(
    kube: Kube, namespace: str, kafka_bootstrap: str, names: Mapping[str, str], truth: Counter[str]
) -> None:
    app = names["app"]
    assert nodes.driver_node(kube, namespace) == NODE_1
    batches = _batches(kube, namespace)
    truth.update(produce_lines(kafka_bootstrap, names["lines"], 30_000, seed=37))
    wait_for(lambda: _batches(kube, namespace) > batches, timeout=120, what="a new batch")
    nodes.stop(NODE_2)
    stopped = time.monotonic()

    def lost_in_the_status() -> dict[str, Any] | None:
        executors = (get(kube, "app", app, namespace).get("status") or {}).get("executors") or {}
        return executors if executors.get("lost") else None

    status = wait_for(lost_in_the_status, timeout=180, what="lost executors in the App's status")
    lost = wait_event(kube, namespace, app, "ExecutorsLost")
    waited = time.monotonic() - stopped
    print(f"executor's node lost: {status['lost']} lost after {waited:.0f} s: {lost['message']}")
    cap, seen = status["cap"], []

    def sampled_within_the_cap(done: Callable[[], bool]) -> Callable[[], bool]:
        def probe() -> bool:
            live = nodes.live_executors(kube, namespace, left_out=NODE_2)
            seen.append(nodes.executor_nodes(kube, namespace)[NODE_1])
            assert live <= cap, f"{live} executor pods live or asked for, past the cap {cap}"
            return done()

        return probe

    # Spark replaces the lost executors on the node left (the operator released their pods).
    replaced = sampled_within_the_cap(lambda: seen[-1] >= EXECUTORS)
    wait_for(replaced, timeout=240, interval=1, what=f"{EXECUTORS} executors on {NODE_1}")
    waited = time.monotonic() - stopped
    print(f"executor's node lost: {seen[-1]} running on {NODE_1} {waited:.0f} s after the loss")
    exact = sampled_within_the_cap(lambda: _table_is(kafka_bootstrap, names["counts"], truth))
    wait_for(exact, timeout=600, interval=5, what=f"the Table exact on {NODE_1}")
    _exactly_once(kafka_bootstrap, names["lines"], names["copies"])
    print(f"executor's node lost: executors on {NODE_1} {min(seen)}..{max(seen)}, cap {cap}")
    nodes.start(NODE_2)
    wait_for(lambda: nodes.node_ready(kube, NODE_2), timeout=120, what=f"{NODE_2} Ready again")


def _move_the_driver_to(kube: Kube, namespace: str, node: str, other: str) -> None:
    with nodes.cordoned(kube, other):
        (driver,) = running(kube, namespace, "driver")
        kube.kubectl("delete", "pod", "-n", namespace, driver["metadata"]["name"], "--wait=false")
        wait_for(
            lambda: (
                nodes.driver_node(kube, namespace) == node
                and running(kube, namespace, "driver")[0]["metadata"]["uid"]
                != driver["metadata"]["uid"]
            ),
            timeout=240,
            what=f"the driver running on {node}",
        )


def _lose_the_drivers_node(
    kube: Kube, namespace: str, kafka_bootstrap: str, names: Mapping[str, str], truth: Counter[str]
) -> float:
    """Stop the driver's node; the seconds from the loss to the first batch committed after it."""
    app = names["app"]
    _move_the_driver_to(kube, namespace, NODE_2, NODE_1)
    batches = _batches(kube, namespace)
    truth.update(produce_lines(kafka_bootstrap, names["lines"], 30_000, seed=38))
    wait_for(lambda: _batches(kube, namespace) > batches, timeout=180, what="a batch on node 2")
    nodes.stop(NODE_2)
    lost_at = datetime.now(UTC)
    stalled = wait_condition(
        kube, "app", app, namespace, condition_type="Stalled", reason="DriverNodeLost", timeout=180
    )
    message = condition(stalled, "Stalled")["message"]
    assert f"kubectl taint node {NODE_2} {OUT_OF_SERVICE.split('=')[0]}" in message, message
    wait_event(kube, namespace, app, "DriverNodeLost")
    seen_lost = (datetime.now(UTC) - lost_at).total_seconds()
    kube.kubectl("taint", "node", NODE_2, OUT_OF_SERVICE)
    tainted = (datetime.now(UTC) - lost_at).total_seconds()
    resumed = wait_for(
        _last_batch_after(kube, namespace, app, lost_at),
        timeout=300,
        what="a batch committed by a driver on node 1",
    )
    assert nodes.driver_node(kube, namespace) == NODE_1
    seconds = (resumed - lost_at).total_seconds()
    print(
        f"driver's node lost: DriverNodeLost after {seen_lost:.0f} s, tainted out-of-service at "
        f"{tainted:.0f} s, first batch committed on {NODE_1} {seconds:.0f} s after the loss"
    )
    wait_table(kafka_bootstrap, names["counts"], truth, timeout=600)
    _exactly_once(kafka_bootstrap, names["lines"], names["copies"])
    return seconds


def test_an_app_across_nodes_loses_neither_node_s_records(
    operator: OperatorProcess,
    kube: Kube,
    namespace: str,
    kafka_bootstrap: str,
    across_app: dict[str, str],
    stack: devstack.StackState,
) -> None:
    # 40,001 lines, then 30,000 at each node's loss: more than 100,000 records over the story.
    truth = produce_lines(kafka_bootstrap, across_app["lines"], 40_001, seed=36)
    _spread_over_both_nodes(kube, namespace, stack, across_app)
    wait_table(kafka_bootstrap, across_app["counts"], truth, timeout=600)
    _exactly_once(kafka_bootstrap, across_app["lines"], across_app["copies"])
    _in_the_bucket(stack, across_app, namespace)
    env = stack.environment()
    for key in ("RILLET_S3_ACCESS_KEY_ID", "RILLET_S3_SECRET_ACCESS_KEY"):
        _secret_nowhere(kube, namespace, across_app["app"], env[key], operator)
    _lose_an_executors_node(kube, namespace, kafka_bootstrap, across_app, truth)
    _lose_the_drivers_node(kube, namespace, kafka_bootstrap, across_app, truth)
