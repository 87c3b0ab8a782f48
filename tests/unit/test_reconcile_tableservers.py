"""The objects of a Table's server, as the operator applies them.

Test plan:
- the server's name is `<table>-server` when that is a Service name; a Table name with dots,
  or too long, gets a valid, distinct, stable name;
- the Deployment runs `rillet table serve` on the Table's topic and formats, under the
  restricted profile (non-root, no escalation, no capabilities, RuntimeDefault seccomp, read-only
  root), without a ServiceAccount token, with the store on a size-limited emptyDir, Ready only
  on /readyz, and rolls one new pod in before an old one goes; lookups are authorized by RBAC
  against the Table's namespace, through the apiserver whose CA alone the pod mounts, and
  metrics have a port of their own;
- every object is controlled by the Table (deleted with it); the Service selects the pods;
- the NetworkPolicy is there unless turned off: lookups from the namespace's pods, the
  operator's and the apiserver's addresses; metrics from the monitoring namespaces only;
- a server runs only for a Table that owns its topic: none for one another object's claim
  beats, a bad name or an unmanaged one, or a Stalled one; none yet before Ready; a withheld
  Table deletes only the objects it controls;
- an avro or protobuf Table's server gets the registry's URL, and its credentials only as
  files of a Secret of its own (built without data, owned by the Table); without a registry
  it is a problem saying what to set; other Tables' servers get neither.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from rillet.api.v1alpha1 import fields, tables
from rillet.driverapi import runspecs
from rillet.reconcile import ownership, statuses, tableservers

ENV = tableservers.ServerEnvironment(
    image="rillet/operator:test", image_pull_policy="Never", kafka_bootstrap="kafka:9092"
)


def _served(name: str = "counts", **serving: object) -> tableservers.ServedTable:
    return tableservers.ServedTable(
        name=name,
        namespace="shop",
        uid="u-1",
        topic=f"shop.{name}",
        key_format="json",
        value_format="json",
        serving=tables.TableServing.model_validate(serving),
    )


def test_server_names_are_service_names() -> None:
    assert tableservers.server_name("counts") == "counts-server"
    dotted = tableservers.server_name("page.views")
    long = tableservers.server_name("a" * 60)
    digit = tableservers.server_name("7days")
    for name in (dotted, long, digit):
        assert len(name) <= 63
        assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name), name
    assert dotted.startswith("page-views-")
    assert tableservers.server_name("page.views") == dotted
    assert tableservers.server_name("page-views") != dotted  # distinct from the plain name


def test_the_deployment_serves_the_table_under_the_restricted_profile() -> None:
    deployment, service, _ = tableservers.server_objects(_served(replicas=2, memory="512Mi"), ENV)

    assert deployment["kind"] == "Deployment"
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "rillet/operator:test"
    assert container["args"][:3] == ["table", "serve", "counts"]
    assert "--topic=shop.counts" in container["args"]
    assert "--key-format=json" in container["args"]
    assert {"name": "RILLET_KAFKA_BOOTSTRAP", "value": "kafka:9092"} in container["env"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["limits"] == {"memory": "512Mi"}
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    assert "--namespace=shop" in container["args"]
    assert "--authorization=kubernetes" in container["args"]
    store, ca = pod["volumes"]
    assert store["emptyDir"] == {"sizeLimit": "1Gi"}
    assert ca == {"name": "kube-ca", "configMap": {"name": "kube-root-ca.crt"}}
    assert f"--apiserver-ca-file={tableservers.KUBE_CA_DIR}/ca.crt" in container["args"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": tableservers.PORT, "metrics": tableservers.METRICS_PORT}
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}

    selected = service["spec"]["selector"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selected.items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"] == selected


def test_every_object_is_controlled_by_the_table() -> None:
    for built in tableservers.server_objects(_served(networkPolicy=True), ENV):
        (owner,) = built["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Table", "counts", "u-1")
        assert owner["controller"] is True
        assert built["metadata"]["namespace"] == "shop"


def test_the_network_policy_is_on_unless_turned_off() -> None:
    kinds = [o["kind"] for o in tableservers.server_objects(_served(networkPolicy=False), ENV)]
    assert kinds == ["Deployment", "Service"]

    *_, policy = tableservers.server_objects(_served(), ENV)
    assert policy["kind"] == "NetworkPolicy"
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (lookups,) = policy["spec"]["ingress"]  # no operator or monitoring named: namespace only
    assert lookups == {"from": [{"podSelector": {}}], "ports": [{"port": tableservers.PORT}]}


def test_the_policy_admits_the_operator_and_the_apiserver_to_lookups_monitoring_to_metrics() -> (
    None
):
    env = dataclasses.replace(
        ENV,
        operator_namespace="rillet-system",
        operator_labels=(("app.kubernetes.io/name", "rillet"),),
        monitoring_namespace_labels=(("kubernetes.io/metadata.name", "monitoring"),),
        apiserver_cidrs=("10.0.0.0/24",),
    )
    *_, policy = tableservers.server_objects(_served(), env)

    lookups, metrics = policy["spec"]["ingress"]
    assert lookups["ports"] == [{"port": tableservers.PORT}]
    assert lookups["from"] == [
        {"podSelector": {}},
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "rillet-system"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "rillet"}},
        },
        {"ipBlock": {"cidr": "10.0.0.0/24"}},
    ]
    assert metrics == {
        "from": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ],
        "ports": [{"port": tableservers.METRICS_PORT}],
    }


def _condition(kind: str, status: str, message: str = "") -> dict[str, str]:
    return {"type": kind, "status": status, "reason": "R", "message": message}


def test_a_withheld_table_deletes_only_the_objects_it_controls() -> None:
    deployment, *_ = tableservers.server_objects(_served(), ENV)
    table = deployment["metadata"]["ownerReferences"][0]["name"]

    def of(name: str, uid: str) -> dict[str, Any]:
        return {"metadata": {"ownerReferences": [tableservers.owner_reference(name, uid)]}}

    assert ownership.is_ours(deployment, of(table, "u-1"))
    assert not ownership.is_ours(deployment, of("another-table", "u-2"))
    made_by_someone = {"metadata": {"name": "counts-server", "ownerReferences": []}}
    assert not ownership.is_ours(made_by_someone, of(table, "u-1"))


def test_only_a_table_that_owns_its_topic_is_served() -> None:
    ready = [_condition("Ready", "True"), _condition("Stalled", "False")]
    assert tableservers.serving_decision(refusal=None, conditions=ready).action == "serve"

    conflict = statuses.Verdict("stalled", "TopicConflict", "Topic team-a/orders owns it")
    refusal = tableservers.ownership_refusal(conflict)
    assert refusal == "TopicConflict: Topic team-a/orders owns it"
    withheld = tableservers.serving_decision(refusal=refusal, conditions=ready)
    assert (withheld.action, withheld.reason) == ("withhold", refusal)
    unmanaged = statuses.Verdict("unmanaged", "Unmanaged", "not managed")
    assert tableservers.ownership_refusal(unmanaged) is not None

    stalled = [_condition("Ready", "False"), _condition("Stalled", "True", "taken by another")]
    decided = tableservers.serving_decision(refusal=None, conditions=stalled)
    assert (decided.action, decided.reason) == ("withhold", "taken by another")


@pytest.mark.parametrize(
    "conditions",
    [[], [_condition("Ready", "False"), _condition("Reconciling", "True")]],
    ids=["no status yet", "Kafka away"],
)
def test_a_table_not_ready_yet_waits_for_its_server(conditions: list[dict[str, str]]) -> None:
    paused = statuses.Verdict("paused", "ReconciliationPaused", "paused")
    waiting = statuses.Verdict("progressing", "WaitingForPartitions", "no writer yet")
    for verdict in (None, paused, waiting):
        refusal = tableservers.ownership_refusal(verdict)
        assert tableservers.serving_decision(refusal=refusal, conditions=conditions).action == (
            "wait"
        )


def test_the_status_names_the_service_and_the_lookup_url_in_the_namespace() -> None:
    assert tableservers.server_status("counts", "shop") == {
        "service": "counts-server",
        "url": "http://counts-server.shop.svc:8080/tables/counts",
    }


REGISTRY = runspecs.SchemaRegistry(
    url="http://registry:8080/apis/ccompat/v7", credentials_dir="/etc/rillet/schema-registry"
)


def _container_and_volumes(
    served: tableservers.ServedTable, env: tableservers.ServerEnvironment
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    deployment = tableservers.server_objects(served, env)[0]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return container, pod["volumes"]


@pytest.mark.parametrize("fmt", ["avro", "protobuf"])
def test_an_avro_or_protobuf_tables_server_reads_the_registry_credentials_from_its_own_secret(
    fmt: fields.Format,
) -> None:
    served = dataclasses.replace(_served(), value_format=fmt)
    env = dataclasses.replace(ENV, schema_registry=REGISTRY)

    container, volumes = _container_and_volumes(served, env)
    secret = tableservers.registry_secret(served, env)

    assert secret is not None
    assert not {"data", "stringData"} & secret.keys()  # the handler adds the data
    assert secret["metadata"]["name"] == "counts-server-schema-registry"
    assert secret["metadata"]["ownerReferences"][0]["kind"] == "Table"
    assert {"name": "RILLET_SCHEMA_REGISTRY_URL", "value": REGISTRY.url} in container["env"]
    assert "--registry-credentials-dir=/etc/rillet/schema-registry" in container["args"]
    mounted = {m["name"]: m for m in container["volumeMounts"]}
    (volume,) = [v for v in volumes if "secret" in v]
    assert volume["secret"]["secretName"] == "counts-server-schema-registry"
    assert mounted[volume["name"]]["readOnly"] is True
    assert f"--value-format={fmt}" in container["args"]
    assert tableservers.registry_problem(served, env) is None
    # protoc's scratch files on the store's volume (the root filesystem is read-only).
    scratch = [e["value"] for e in container["env"] if e["name"] == "TMPDIR"]
    assert scratch == ([tableservers.STORE_DIR] if fmt == "protobuf" else [])
    assert {"name": "store", "mountPath": tableservers.STORE_DIR} in container["volumeMounts"]


def test_a_registry_without_credentials_gets_no_secret() -> None:
    served = dataclasses.replace(_served(), value_format="avro")
    env = dataclasses.replace(
        ENV, schema_registry=REGISTRY.model_copy(update={"credentials_dir": None})
    )

    container, volumes = _container_and_volumes(served, env)

    assert tableservers.registry_secret(served, env) is None
    assert [e["name"] for e in container["env"]] == [
        "RILLET_KAFKA_BOOTSTRAP",
        "RILLET_SCHEMA_REGISTRY_URL",
    ]
    assert not [v for v in volumes if "secret" in v]
    assert not [a for a in container["args"] if a.startswith("--registry-credentials-dir")]


@pytest.mark.parametrize("fmt", ["avro", "protobuf"])
def test_an_avro_or_protobuf_table_without_a_registry_is_a_problem_saying_what_to_set(
    fmt: fields.Format,
) -> None:
    served = dataclasses.replace(_served(), value_format=fmt)

    problem = tableservers.registry_problem(served, ENV)

    assert problem is not None
    assert "schemaRegistry.url" in problem
    assert f"values are {fmt}" in problem


def test_other_tables_servers_get_nothing_of_the_registry() -> None:
    env = dataclasses.replace(ENV, schema_registry=REGISTRY)

    container, volumes = _container_and_volumes(_served(), env)

    assert tableservers.registry_secret(_served(), env) is None
    assert [e["name"] for e in container["env"]] == ["RILLET_KAFKA_BOOTSTRAP"]
    assert [v["name"] for v in volumes] == ["store", "kube-ca"]
