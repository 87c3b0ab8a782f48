"""The health table of docs/health.md, as Flux and Argo CD read objects the real operator wrote.

Objects of each kind are driven into each state by a real operator (the session's, or one of
the test's own), read back from the apiserver, and handed to tests/gitopshealth: kstatus as
Flux computes it, and charts/rillet/argocd/health.lua run as Argo CD runs it. The table found is
shown in the session's summary and must equal the table docs/health.md documents.

Test plan (kind x state: how the state is reached):
- not seen yet: applied in the namespace of an operator of the test that has not started yet
  (the CRD defaults its status to observedGeneration 0);
- generation not observed: that operator observed them, was stopped, then their spec changed
  (kstatus and Argo CD must say so in their messages, not only by their verdict);
- Ready: Topic, Table with partitions; App with its driver running on the node;
- executors unschedulable: an App whose driver runs on the node but whose executor asks for 64
  CPUs (ExecutorsUnschedulable);
- Reconciling: Topic under an operator whose Kafka is unreachable (KafkaUnavailable); Table
  without partitions or writer (WaitingForPartitions); App reading a missing Topic
  (WaitingForTopics);
- Stalled: Topic and Table naming the Kafka topic of an older Topic (TopicConflict); App reading
  a Table without a valueSchema (InvalidSpec);
- paused (rillet.io/paused=true) after Ready, from creation, and while Stalled (Topics and
  Tables); suspended (an App created with spec.suspend).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from rillet_devstack import processes
from rillet_devstack.operating import OperatorProcess

from . import gitopshealth
from .conftest import REPO, Kube
from .objects import app, apply, get, table, topic, wait_condition

pytestmark = pytest.mark.usefixtures("operator")

DOC = REPO / "docs" / "health.md"
TABLE_BEGIN, TABLE_END = "<!-- health-table begin", "<!-- health-table end"
SMALL = {"cpu": "200m", "memory": "1Gi"}
PAUSED = "rillet.io/paused=true"

Row = tuple[str, str]  # (kind, state), as in the documented table
Names = Callable[[str], str]


def documented_table() -> dict[Row, tuple[str, str]]:
    """(kind, state) -> (kstatus, Argo CD), from the marked table of docs/health.md."""
    marked = DOC.read_text().split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0]
    lines = [line for line in marked.splitlines() if line.startswith("|")]
    header = _cells(lines[0])
    kind, state = header.index("Kind"), header.index("State")
    kstatus, argocd = header.index("kstatus (Flux)"), header.index("Argo CD")
    return {(row[kind], row[state]): (row[kstatus], row[argocd]) for row in map(_cells, lines[2:])}


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def paused(manifest: dict[str, Any]) -> dict[str, Any]:
    manifest["metadata"]["annotations"] = {"rillet.io/paused": "true"}
    return manifest


def pause(kube: Kube, kind: str, name: str, namespace: str) -> dict[str, Any]:
    """Annotate the object paused; return it once the operator says so."""
    kube.kubectl("annotate", kind, name, "-n", namespace, PAUSED)
    return wait_paused(kube, kind, name, namespace)


def wait_paused(kube: Kube, kind: str, name: str, namespace: str) -> dict[str, Any]:
    return wait_condition(
        kube,
        kind,
        name,
        namespace,
        condition_type="Reconciling",
        status="False",
        reason="ReconciliationPaused",
    )


def wait_reason(
    kube: Kube,
    kind: str,
    name: str,
    namespace: str,
    condition_type: str,
    reason: str,
    **wait: float,
) -> dict[str, Any]:
    """The object once its `condition_type` condition is True with `reason`."""
    return wait_condition(
        kube,
        kind,
        name,
        namespace,
        condition_type=condition_type,
        status="True",
        reason=reason,
        **wait,
    )


def apply_session_objects(kube: Kube, namespace: str, n: Names, runtime_image: str) -> None:
    """Everything the session operator takes into a state, in one apply."""
    lookup = table(n("a-lookup"), namespace, partitions=1)
    del lookup["spec"]["valueSchema"]  # an App reading it cannot be built: InvalidSpec
    stalled_app = app(n("a-stalled"), namespace, reads=n("a-words"), writes=n("a-out-stalled"))
    stalled_app["spec"]["inputs"].append({"name": "lookup", "tableRef": {"name": n("a-lookup")}})
    apply(
        kube,
        topic(n("t-ready"), namespace),
        topic(n("t-paused"), namespace),
        paused(topic(n("t-new-paused"), namespace)),
        table(n("b-ready"), namespace, partitions=1),
        table(n("b-waiting"), namespace),
        table(n("b-paused"), namespace, partitions=1),
        paused(table(n("b-new-paused"), namespace, partitions=1)),
        topic(n("a-words"), namespace),
        table(n("a-counts"), namespace),
        app(
            n("a-ready"),
            namespace,
            reads=n("a-words"),
            writes=n("a-counts"),
            image=runtime_image,
            scaling={"minExecutors": 1, "maxExecutors": 1},
            driver=SMALL,
            executor=SMALL,
        ),
        app(
            n("a-unplaced"),
            namespace,
            reads=n("a-words"),
            writes=n("a-out-unplaced"),
            image=runtime_image,
            scaling={"minExecutors": 1, "maxExecutors": 1},
            driver=SMALL,
            executor={"cpu": "64", "memory": "1Gi"},  # the node has 2 CPUs
        ),
        table(n("a-out-unplaced"), namespace, partitions=1),
        lookup,
        table(n("a-out-stalled"), namespace, partitions=1),
        stalled_app,
        app(n("a-waiting"), namespace, reads=n("a-missing"), writes=n("a-out-waiting")),
        app(
            n("a-suspended"),
            namespace,
            reads=n("a-words"),
            writes=n("a-out-suspended"),
            suspend=True,
        ),
    )


def unobserved_states(
    kube: Kube, n: Names, lone_operator: Callable[..., OperatorProcess]
) -> list[tuple[Row, dict[str, Any]]]:
    """Not seen yet, then a generation not observed, under an operator of the test's own."""
    own = lone_operator()
    namespace = own.namespace_pattern
    objects: dict[str, tuple[str, str, dict[str, Any]]] = {
        "Topic": ("topic", n("u-topic"), {"partitions": 2}),
        "Table": ("table", n("u-table"), {"partitions": 2}),
        "App": ("app", n("u-app"), {"scaling": {"maxExecutors": 3}}),
    }
    apply(
        kube,
        topic(n("u-topic"), namespace),
        table(n("u-table"), namespace, partitions=1),
        app(n("u-app"), namespace, reads=n("u-topic"), writes=n("u-table"), suspend=True),
    )
    found: list[tuple[Row, dict[str, Any]]] = []
    for kind, (plural, name, _) in objects.items():
        obj = get(kube, plural, name, namespace)
        # No operator wrote it: what the apiserver returns is the CRD's default status.
        assert obj.get("status") == {"observedGeneration": 0}, (kind, name, obj.get("status"))
        found.append(((kind, "not seen yet"), obj))

    own.start()
    wait_condition(kube, "topic", n("u-topic"), namespace)
    wait_condition(kube, "table", n("u-table"), namespace)
    wait_condition(
        kube,
        "app",
        n("u-app"),
        namespace,
        condition_type="Reconciling",
        status="False",
        reason="Suspended",
    )
    own.stop()  # nothing reconciles the namespace now
    for kind, (plural, name, change) in objects.items():
        kube.kubectl(
            "patch",
            plural,
            name,
            "-n",
            namespace,
            "--type=merge",
            "-p",
            json.dumps({"spec": change}),
        )
        obj = get(kube, plural, name, namespace)
        assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"] - 1
        found.append(((kind, "generation not observed"), obj))
    own.start()  # as in production: the objects go while an operator runs
    return found


def kafka_unavailable_topic(
    kube: Kube, n: Names, lone_operator: Callable[..., OperatorProcess]
) -> dict[str, Any]:
    """A Topic Reconciling because its operator's Kafka does not answer."""
    own = lone_operator(
        settings={
            "RILLET_KAFKA_BOOTSTRAP": f"127.0.0.1:{processes.free_port()}",  # nothing listens
            "RILLET_KAFKA_REQUEST_TIMEOUT_SECONDS": "2",
        }
    )
    own.start()
    namespace = own.namespace_pattern
    apply(kube, topic(n("k-topic"), namespace))
    return wait_reason(kube, "topic", n("k-topic"), namespace, "Reconciling", "KafkaUnavailable")


def topic_and_table_states(
    kube: Kube, namespace: str, n: Names
) -> list[tuple[Row, dict[str, Any]]]:
    """Ready, Reconciling (Tables), Stalled and paused Topics and Tables of the session
    operator (the Topic Reconciling comes from `kafka_unavailable_topic`)."""
    ready_topic = wait_condition(kube, "topic", n("t-ready"), namespace)
    taken = ready_topic["status"]["topicName"]  # younger claims on it lose: TopicConflict
    apply(
        kube,
        topic(n("t-rival"), namespace, topicName=taken),
        table(n("b-rival"), namespace, partitions=1, topicName=taken),
    )
    found = [
        (("Topic", "Ready"), ready_topic),
        (("Table", "Ready"), wait_condition(kube, "table", n("b-ready"), namespace)),
        (
            ("Table", "Reconciling"),
            wait_reason(
                kube, "table", n("b-waiting"), namespace, "Reconciling", "WaitingForPartitions"
            ),
        ),
    ]
    for kind, plural, prefix in (("Topic", "topic", "t"), ("Table", "table", "b")):
        rival = n(f"{prefix}-rival")
        found.append(
            (
                (kind, "Stalled"),
                wait_reason(kube, plural, rival, namespace, "Stalled", "TopicConflict"),
            )
        )
        found.append(((kind, "paused while Stalled"), pause(kube, plural, rival, namespace)))
        wait_condition(kube, plural, n(f"{prefix}-paused"), namespace)
        found.append(
            ((kind, "paused after Ready"), pause(kube, plural, n(f"{prefix}-paused"), namespace))
        )
        found.append(
            (
                (kind, "paused from creation"),
                wait_paused(kube, plural, n(f"{prefix}-new-paused"), namespace),
            )
        )
    return found


def app_states(kube: Kube, namespace: str, n: Names) -> list[tuple[Row, dict[str, Any]]]:
    """Reconciling, Stalled, suspended and Ready Apps of the session operator."""
    return [
        (
            ("App", "Reconciling"),
            wait_reason(kube, "app", n("a-waiting"), namespace, "Reconciling", "WaitingForTopics"),
        ),
        (
            ("App", "Stalled"),
            wait_reason(kube, "app", n("a-stalled"), namespace, "Stalled", "InvalidSpec"),
        ),
        (
            ("App", "suspended"),
            wait_condition(
                kube,
                "app",
                n("a-suspended"),
                namespace,
                condition_type="Reconciling",
                status="False",
                reason="Suspended",
            ),
        ),
        (
            ("App", "executors unschedulable"),
            wait_reason(
                kube,
                "app",
                n("a-unplaced"),
                namespace,
                "Reconciling",
                "ExecutorsUnschedulable",
                timeout=300,
            ),
        ),
        # The driver starts on the node: its image, a JVM, then Spark's first batch.
        (("App", "Ready"), wait_condition(kube, "app", n("a-ready"), namespace, timeout=300)),
    ]


def test_health_table_is_as_documented(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    runtime_image: str,
    lone_operator: Callable[..., OperatorProcess],
    measurement: Callable[[str], None],
) -> None:
    def n(what: str) -> str:
        return f"{kafka_prefix}-{what}"

    expected = documented_table()
    apply_session_objects(kube, namespace, n, runtime_image)
    read = [
        *unobserved_states(kube, n, lone_operator),
        (("Topic", "Reconciling"), kafka_unavailable_topic(kube, n, lone_operator)),
        *topic_and_table_states(kube, namespace, n),
        *app_states(kube, namespace, n),
    ]
    healths = gitopshealth.assess([obj for _, obj in read])
    found = {row: health for (row, _), health in zip(read, healths, strict=True)}

    measurement("health table (kind | state | kstatus | Argo CD), from the real operator:")
    for row in [*expected, *(row for row in found if row not in expected)]:
        health = found.get(row)
        seen = f"{health.kstatus} | {health.argocd}" if health else "not produced"
        measurement(f"  {row[0]} | {row[1]} | {seen}")

    for (kind, state), health in found.items():
        if state in ("not seen yet", "generation not observed"):
            assert "latest observed generation" in health.kstatus_message, (kind, health)
            assert "act on generation" in health.argocd_message, (kind, health)
    table_found = {row: (h.kstatus, h.argocd) for row, h in found.items()}
    differences = {
        row: {"documented": expected.get(row), "found": table_found.get(row)}
        for row in expected.keys() | table_found.keys()
        if expected.get(row) != table_found.get(row)
    }
    assert not differences, f"docs/health.md differs from what the tools say: {differences}"
