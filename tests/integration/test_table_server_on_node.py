"""A Table with spec.serve on the node: the operator runs its server, and `rillet table get`
asks it through the cluster.

Test plan (an operator of the test's own, Table server pods on the stack's node running the
stack's operator image):
- a Table with serve (and a NetworkPolicy) gets a Deployment, a Service and a NetworkPolicy,
  owned by it; its pod runs under the restricted profile and becomes Ready once it has read the
  topic; status.server names the Service and the in-cluster URL;
- `rillet table get TABLE KEY -n NS` answers from the server through the apiserver's proxy
  with the test's admin token, given no Kafka bootstrap servers at all, so nothing but the
  server could have answered; a missing key exits 1;
- lookups are authorized by RBAC, asked from pods on the node with their own mounted
  ServiceAccount tokens (servedtables.asked_from_pods): a pod of another namespace cannot
  connect (the Table's NetworkPolicy, enforced on the stack), a pod of the Table's namespace
  whose ServiceAccount may not get the Table 403 (and 401 without a token), one allowed by a
  Role and RoleBinding the value; a key matching every key is 400; metrics answer on their
  own port without a token to the monitoring namespace (here the other one) alone, and not on
  the lookups' port;
- a second served Table naming the same topic loses the claim: no server objects, no
  status.server, a ServerWithheld Event;
- removing serve removes the three objects and status.server, and `rillet table get` reads
  the topic again (and, given no bootstrap servers, says it needs them).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from confluent_kafka import Producer

from rillet.reconcile import tableservers
from rillet_devstack.operating import OperatorProcess

from .conftest import Kube
from .objects import apply, condition, events, exists, get, table, wait_condition
from .polling import wait_for
from .servedtables import asked_from_pods, ready_replicas, server_settings, table_get

CLI = (sys.executable, "-m", "rillet.cli")


def _server_pod(kube: Kube, table_name: str, namespace: str) -> dict[str, Any]:
    listed = kube.kubectl(
        "get", "pods", "-n", namespace, "-l", f"rillet.io/table={table_name}", "-o", "json"
    ).stdout
    (pod,) = json.loads(listed)["items"]
    return pod  # type: ignore[no-any-return]


def test_a_served_table_runs_its_server_and_the_cli_asks_it(
    kube: Kube,
    kafka_bootstrap: str,
    kafka_prefix: str,
    operator_image: str,
    lone_operator: Callable[..., OperatorProcess],
    new_namespace: Callable[..., str],
) -> None:
    # The other namespace is the one monitoring runs in, as far as this operator knows.
    other = new_namespace(operated=False)
    monitoring = json.dumps({"kubernetes.io/metadata.name": other})
    settings = {"RILLET_TABLE_SERVER_MONITORING_NAMESPACE_LABELS": monitoring}
    own = lone_operator(settings={**server_settings(operator_image), **settings})
    own.start()
    namespace = own.namespace_pattern
    name, topic = "profiles", f"{kafka_prefix}-profiles"
    spec = {"partitions": 2, "topicName": topic, "keyFormat": "json"}
    apply(kube, table(name, namespace, **spec, serve={"networkPolicy": True}))
    wait_condition(kube, "table", name, namespace, timeout=90)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for n in range(1, 21):
        key = json.dumps({"user": f"u{n}"}, separators=(",", ":"))
        producer.produce(topic, key=key.encode(), value=json.dumps({"visits": n}).encode())
    assert producer.flush(30) == 0

    server = tableservers.server_name(name)
    status = wait_for(
        lambda: (get(kube, "table", name, namespace).get("status") or {}).get("server"),
        timeout=60,
        what="status.server",
    )
    assert status == {
        "service": server,
        "url": f"http://{server}.{namespace}.svc:8080/tables/{name}",
    }
    wait_for(
        lambda: ready_replicas(kube, server, namespace) == 1,
        timeout=180,
        interval=1,
        what="the server pod to be Ready",
    )
    pod = _server_pod(kube, name, namespace)
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    for kind in ("deployment", "service", "networkpolicy"):
        owner = get(kube, kind, server, namespace)["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("Table", name)

    found = table_get(kube, name, '{"user": "u7"}', namespace, None)  # only the server knows
    assert (found.returncode, found.stdout) == (0, '{"visits": 7}\n'), found.stderr
    assert "note:" not in found.stderr, found.stderr
    missing = table_get(kube, name, '{"user": "u99"}', namespace, None)
    assert missing.returncode == 1, missing.stderr

    _lookups_are_authorized_by_rbac(kube, operator_image, other, namespace, status)
    _a_table_that_loses_its_topic_gets_no_server(kube, namespace, name, topic)

    kube.kubectl(
        "patch",
        "table",
        name,
        "-n",
        namespace,
        "--type=json",
        "-p",
        '[{"op": "remove", "path": "/spec/serve"}]',
    )
    wait_for(
        lambda: (
            not any(
                exists(kube, kind, server, namespace)
                for kind in ("deployment", "service", "networkpolicy")
            )
            and "server" not in (get(kube, "table", name, namespace).get("status") or {})
        ),
        timeout=60,
        what="the server's objects and status.server to go",
    )
    scanned = table_get(kube, name, '{"user": "u7"}', namespace, kafka_bootstrap)
    assert (scanned.returncode, scanned.stdout) == (0, '{"visits": 7}\n'), scanned.stderr
    no_kafka = table_get(kube, name, '{"user": "u7"}', namespace, None)
    assert no_kafka.returncode == 2
    assert "give -b or set RILLET_KAFKA_BOOTSTRAP" in no_kafka.stderr


def _lookups_are_authorized_by_rbac(
    kube: Kube, image: str, other_namespace: str, namespace: str, server: dict[str, str]
) -> None:
    """Pods with their own ServiceAccount tokens ask the server in the cluster; the other
    namespace is the monitoring one."""
    name = server["url"].rsplit("/", 1)[1]
    wait_for(
        lambda: exists(kube, "serviceaccount", "default", other_namespace),
        timeout=30,
        what="the other namespace's default ServiceAccount",
    )
    kube.kubectl("create", "serviceaccount", "reader", "-n", namespace)
    kube.kubectl(
        *("create", "role", "table-reader", "-n", namespace, "--verb=get"),
        "--resource=tables.rillet.io",
        f"--resource-name={name}",
    )
    kube.kubectl(
        *("create", "rolebinding", "table-reader", "-n", namespace, "--role=table-reader"),
        f"--serviceaccount={namespace}:reader",
    )
    lookup = f"{server['url']}/{quote(json.dumps({'user': 'u7'}), safe='')}"
    metrics = f"http://{server['service']}.{namespace}.svc:{tableservers.METRICS_PORT}/metrics"
    lookups_port_metrics = f"http://{server['service']}.{namespace}.svc:{tableservers.PORT}/metrics"
    everything = f"{server['url']}/{quote('{}', safe='')}"
    answers = asked_from_pods(
        kube,
        {
            "outsider": (other_namespace, "default", [lookup, metrics]),
            "denied": (namespace, "default", [lookup, f"{lookup}#no-token"]),
            "allowed": (namespace, "reader", [lookup, everything, metrics, lookups_port_metrics]),
        },
        image,
    )
    outsider, scraped = answers["outsider"]
    assert outsider[0] == 0, outsider  # no connection
    assert "timed out" in outsider[1], outsider
    assert scraped[0] == 200, scraped
    assert "rillet_table_server_lookups_total" in scraped[1], scraped[1][:500]
    denied, anonymous = answers["denied"]
    assert denied[0] == 403, denied
    assert anonymous[0] == 401, anonymous
    found, refused, not_monitoring, not_here = answers["allowed"]
    assert found == [200, '{"visits": 7}'], found
    assert refused[0] == 400, refused
    assert "matches every key" in refused[1], refused
    assert not_monitoring[0] == 0, not_monitoring  # no connection
    assert not_here[0] == 404, not_here


def _a_table_that_loses_its_topic_gets_no_server(
    kube: Kube, namespace: str, owner: str, topic: str
) -> None:
    """A Table naming a topic another object claims gets no server."""
    rival = "profiles-copy"
    spec = {"partitions": 2, "topicName": topic, "keyFormat": "json"}
    apply(kube, table(rival, namespace, **spec, serve={}))
    wait_for(
        lambda: any(e.get("reason") == "ServerWithheld" for e in events(kube, namespace, rival)),
        timeout=60,
        what="a ServerWithheld Event on the Table that lost the claim",
    )
    stalled = condition(get(kube, "table", rival, namespace), "Stalled")
    assert stalled.get("reason") == "TopicConflict", stalled
    server = tableservers.server_name(rival)
    assert not any(exists(kube, kind, server, namespace) for kind in ("deployment", "service"))
    assert "server" not in (get(kube, "table", rival, namespace).get("status") or {})
    assert exists(kube, "deployment", tableservers.server_name(owner), namespace)
    kube.kubectl("delete", "table", rival, "-n", namespace)
