"""The operator runs every App: its objects, its references, what it leaves alone.

These need no running pod (the driver pod may stay Pending): what is checked is what the
operator writes, and the apiserver's own answers. (The driver's rights: test_driver_rights.py;
suspend and scaling: test_apps_scaling.py.)

Test plan:
- the objects of an App (ServiceAccount, RoleBinding, ConfigMap, Service, StatefulSet)
  exist, owned by the App as controller, and the garbage collector removes them after the App
  is deleted; no Role is made, and the Role and RoleBinding `<app>-driver` an older release
  made for the App are deleted at its next reconcile (a Role of that name it does not own is
  left);
- a driver created in a namespace that does not enforce the restricted Pod Security level gets
  a Warning Event (PodSecurityNotRestricted); under that level, none, and its pod is admitted;
- an object of an App's name that Rillet did not make (a Service or StatefulSet `<app>-driver`
  of the user's) is neither changed, replaced nor deleted: the App is Stalled (ObjectNotOwned)
  naming it, and the object is as it was, after the App is deleted too;
- an App naming a missing Topic is Reconciling (WaitingForTopics, naming it, with an Event),
  then proceeds to its driver once the Topic exists;
- an App whose driver fits no node says so in its Ready condition, with the scheduler's reason;
- a Table applied together with the App that writes it is Ready within seconds, with the App's
  input partitions, under an operator whose resync is 5 minutes away (also when the Table was
  already waiting when the App came);
- a spec a builder refuses (a Table input without a schema) is Stalled (InvalidSpec) with the
  reason, and the operator carries on.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from rillet_devstack.operating import OperatorProcess

from .conftest import Kube, Unique
from .gitopshealth import argocd_health
from .kafka_reads import kafka_partitions
from .objects import (
    app,
    applied_app,
    apply,
    condition,
    events,
    exists,
    get,
    table,
    topic,
    wait_condition,
)
from .polling import wait_for

OWNED = (
    ("serviceaccount", "{app}-driver"),
    ("rolebinding", "{app}-driver-rights"),
    ("configmap", "{app}-run"),
    ("service", "{app}-driver"),
    ("statefulset", "{app}-driver"),
)


def absent(kube: Kube, kind: str, name: str, namespace: str) -> bool:
    return not exists(kube, kind, name, namespace)


def owner_of(kube: Kube, kind: str, name: str, namespace: str) -> list[tuple[str, str, bool]]:
    refs = get(kube, kind, name, namespace)["metadata"].get("ownerReferences") or []
    return [(r["kind"], r["uid"], bool(r.get("controller"))) for r in refs]


@pytest.mark.usefixtures("operator")
def test_objects_are_owned_by_the_app_and_go_with_it(
    kube: Kube, namespace: str, unique: Unique
) -> None:
    name, obj = applied_app(kube, namespace, unique)
    uid = obj["metadata"]["uid"]
    for kind, pattern in OWNED:
        child = pattern.format(app=name)
        wait_for(functools.partial(exists, kube, kind, child, namespace), what=f"{kind} {child}")
        assert owner_of(kube, kind, child, namespace) == [("App", uid, True)]

    kube.kubectl("delete", "app", name, "-n", namespace)
    for kind, pattern in OWNED:
        child = pattern.format(app=name)
        wait_for(
            functools.partial(absent, kube, kind, child, namespace),
            timeout=60,
            what=f"{kind} {child} garbage-collected",
        )


def _legacy_rbac(app: dict[str, Any], *, owned: tuple[str, ...]) -> str:
    """The Role and RoleBinding `<app>-driver` as an older release made them (a manifest),
    owned by the App if their kind is in `owned`."""
    meta = app["metadata"]
    name, namespace = f"{meta['name']}-driver", meta["namespace"]
    owner = {
        "apiVersion": "rillet.io/v1alpha1",
        "kind": "App",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    role = {
        "kind": "Role",
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    }
    binding = {
        "kind": "RoleBinding",
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    items = [
        {
            **obj,
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "metadata": {
                "name": name,
                "namespace": namespace,
                **({"ownerReferences": [owner]} if obj["kind"] in owned else {}),
            },
        }
        for obj in (role, binding)
    ]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


@pytest.mark.usefixtures("operator")
def test_an_older_releases_driver_role_goes_and_a_strangers_binding_stays(
    kube: Kube, namespace: str, unique: Unique
) -> None:
    """An App made by an older release has a Role `<app>-driver` and a RoleBinding to it; the
    operator binds the driver ClusterRole instead and deletes those two, when the App's."""
    name, upgraded = applied_app(kube, namespace, unique)
    other, stranger = applied_app(kube, namespace, unique, suffix="-b")
    kube.kubectl("apply", "-f", "-", input=_legacy_rbac(upgraded, owned=("Role", "RoleBinding")))
    # Someone else's RoleBinding of that name (deleted first, were it the App's) beside the
    # App's own Role (deleted after it).
    kube.kubectl("apply", "-f", "-", input=_legacy_rbac(stranger, owned=("Role",)))
    for app_name in (name, other):  # a change of the App's: the operator reconciles it
        kube.kubectl("annotate", "app", app_name, "-n", namespace, "test.rillet.io/touch=1")

    for app_name in (name, other):
        wait_for(
            functools.partial(absent, kube, "role", f"{app_name}-driver", namespace),
            timeout=60,
            what=f"the older release's Role {app_name}-driver deleted",
        )
        assert exists(kube, "rolebinding", f"{app_name}-driver-rights", namespace)
    assert absent(kube, "rolebinding", f"{name}-driver", namespace)
    assert owner_of(kube, "rolebinding", f"{other}-driver", namespace) == []


@pytest.mark.usefixtures("operator")
def test_missing_topic_is_reported_then_the_app_proceeds(
    kube: Kube, namespace: str, unique: Unique
) -> None:
    words, counts, name = unique("later"), unique("counts"), unique("waiter")
    apply(kube, table(counts, namespace), app(name, namespace, reads=words, writes=counts))
    waiting = wait_condition(
        kube, "app", name, namespace, condition_type="Reconciling", reason="WaitingForTopics"
    )
    assert f"Topic {words} not found" in condition(waiting, "Reconciling")["message"]
    assert waiting["status"]["phase"] == "Pending"
    assert not exists(kube, "statefulset", f"{name}-driver", namespace)
    wait_for(
        lambda: [e for e in events(kube, namespace, name) if e["reason"] == "WaitingForTopics"],
        timeout=20,
        what="a WaitingForTopics Event",
    )

    apply(kube, topic(words, namespace, partitions=2))
    wait_for(
        lambda: exists(kube, "statefulset", f"{name}-driver", namespace),
        timeout=30,
        what="the driver StatefulSet once the Topic exists",
    )
    # The operator writes the status after the objects: wait for it rather than read it once.
    wait_for(
        lambda: (
            condition(get(kube, "app", name, namespace), "Ready").get("reason")
            != "WaitingForTopics"
        ),
        timeout=30,
        what="the App's Ready condition to move on from WaitingForTopics",
    )


@pytest.mark.usefixtures("operator")
def test_a_driver_that_fits_no_node_says_why(kube: Kube, namespace: str, unique: Unique) -> None:
    name, _ = applied_app(kube, namespace, unique, driver={"cpu": "64", "memory": "1Gi"})
    message = wait_for(
        lambda: (
            (
                said := condition(get(kube, "app", name, namespace), "Ready").get("message", "")
            ).startswith("the driver pod cannot be scheduled yet: ")
            and said
        ),
        timeout=60,
        what="the Ready condition to say the driver cannot be scheduled",
    )
    assert "Insufficient cpu" in message


def ready_seconds(kube: Kube, name: str, namespace: str, started: float) -> float:
    wait_condition(kube, "table", name, namespace, timeout=60)
    return time.monotonic() - started


def test_table_applied_with_its_writer_is_ready_within_seconds(
    kube: Kube,
    unique: Unique,
    kafka_admin: AdminClient,
    lone_operator: Callable[..., OperatorProcess],
    measurement: Callable[[str], None],
) -> None:
    own = lone_operator(resync_seconds=300)  # a Table waiting for the resync would show
    own.start()
    namespace = own.namespace_pattern
    words, counts, name = unique("words"), unique("counts"), unique("writer")
    apply(kube, topic(words, namespace, partitions=3))
    wait_condition(kube, "topic", words, namespace)  # the operator is up: time only what follows
    started = time.monotonic()
    apply(kube, table(counts, namespace), app(name, namespace, reads=words, writes=counts))
    together = ready_seconds(kube, counts, namespace, started)
    measurement(f"Table Ready {together:.1f} s after being applied with its writer App")
    assert together < 15
    assert kafka_partitions(kafka_admin, counts) == 3

    later_counts, later = unique("counts2"), unique("writer2")
    apply(kube, table(later_counts, namespace))
    wait_condition(
        kube,
        "table",
        later_counts,
        namespace,
        condition_type="Reconciling",
        reason="WaitingForPartitions",
    )
    started = time.monotonic()
    apply(kube, app(later, namespace, reads=words, writes=later_counts))
    after = ready_seconds(kube, later_counts, namespace, started)
    measurement(f"waiting Table Ready {after:.1f} s after its writer App was applied")
    assert after < 15
    assert get(kube, "table", later_counts, namespace)["status"]["writers"] == [later]


@pytest.mark.usefixtures("operator")
def test_a_driver_starting_where_pods_are_not_restricted_is_warned_about(
    kube: Kube, new_namespace: Callable[..., str], unique: Unique
) -> None:
    """The Pod Security level of the namespace: unset, a Warning as the driver is created; the
    restricted level enforced, none, and the driver pod is admitted under it."""
    loose, restricted = new_namespace(), new_namespace()
    kube.kubectl("label", "namespace", restricted, "pod-security.kubernetes.io/enforce=restricted")
    apps = {loose: applied_app(kube, loose, unique)[0]}
    apps[restricted] = applied_app(kube, restricted, unique, "2")[0]

    def reasons(namespace: str) -> set[str]:
        return {e["reason"] for e in events(kube, namespace, apps[namespace])}

    wait_for(
        lambda: {"DriverCreated", "PodSecurityNotRestricted"} <= reasons(loose),
        timeout=60,
        what="a PodSecurityNotRestricted Warning beside DriverCreated",
    )
    wait_for(
        lambda: exists(kube, "pod", f"{apps[restricted]}-driver-0", restricted),
        timeout=60,
        what="the driver pod admitted under the restricted level",
    )
    assert "DriverCreated" in reasons(restricted)
    assert "PodSecurityNotRestricted" not in reasons(restricted)


def _theirs(kind: str, name: str, namespace: str) -> dict[str, Any]:
    """A Service or StatefulSet `name` that a user made (a StatefulSet of no replicas)."""
    meta = {"name": name, "namespace": namespace, "labels": {"team": "a"}}
    if kind == "Service":
        spec: dict[str, Any] = {"selector": {"team": "a"}, "ports": [{"port": 8080}]}
        return {"apiVersion": "v1", "kind": kind, "metadata": meta, "spec": spec}
    template = {
        "metadata": {"labels": {"team": "a"}},
        "spec": {"containers": [{"name": "c", "image": "rillet/spark-runtime:0.1.0"}]},
    }
    spec = {"replicas": 0, "selector": {"matchLabels": {"team": "a"}}, "template": template}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": spec}


@pytest.mark.usefixtures("operator")
@pytest.mark.parametrize("kind", ["Service", "StatefulSet"])
def test_an_object_of_the_apps_name_that_rillet_did_not_make_is_left_alone(
    kube: Kube, namespace: str, unique: Unique, kind: str
) -> None:
    name = unique("app")
    kube.kubectl("create", "-f", "-", input=json.dumps(_theirs(kind, f"{name}-driver", namespace)))
    before = get(kube, kind.lower(), f"{name}-driver", namespace)
    words, counts = unique("words"), unique("counts")
    apply(
        kube,
        topic(words, namespace, partitions=2),
        table(counts, namespace),
        app(name, namespace, reads=words, writes=counts),
    )
    stalled = wait_condition(
        kube, "app", name, namespace, condition_type="Stalled", reason="ObjectNotOwned"
    )
    message = condition(stalled, "Stalled")["message"]
    assert f"{kind} {name}-driver exists and was not made by Rillet for App {name}" in message
    if kind == "Service":
        assert absent(kube, "statefulset", f"{name}-driver", namespace)  # nothing after it

    kube.kubectl("delete", "app", name, "-n", namespace, "--wait=true", "--timeout=60s")
    wait_for(
        lambda: absent(kube, "configmap", f"{name}-run", namespace),
        timeout=60,
        what="the App's own objects garbage-collected",
    )
    # Neither changed nor (a StatefulSet whose selector differs from the App's) replaced.
    after = get(kube, kind.lower(), f"{name}-driver", namespace)
    # (Its resourceVersion moves: the StatefulSet controller writes its status.)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["metadata"].get("generation") == before["metadata"].get("generation")
    assert (after["metadata"]["labels"], after["spec"]) == (
        before["metadata"]["labels"],
        before["spec"],
    )
    assert "ownerReferences" not in after["metadata"]
    managers = {entry["manager"] for entry in after["metadata"]["managedFields"]}
    assert "rillet-operator" not in managers, managers


@pytest.mark.usefixtures("operator")
def test_a_spec_the_operator_cannot_build_is_stalled(
    kube: Kube, namespace: str, unique: Unique
) -> None:
    words, counts, schemaless = unique("words"), unique("counts"), unique("lookup")
    name = unique("broken")
    lookup = table(schemaless, namespace, partitions=2)
    del lookup["spec"]["valueSchema"]
    broken = app(name, namespace, reads=words, writes=counts)
    broken["spec"]["inputs"].append({"name": "lookup", "tableRef": {"name": schemaless}})
    apply(kube, topic(words, namespace, partitions=2), table(counts, namespace), lookup, broken)

    stalled = wait_condition(
        kube, "app", name, namespace, condition_type="Stalled", reason="InvalidSpec"
    )
    assert "has no valueSchema" in condition(stalled, "Stalled")["message"]
    assert stalled["status"]["phase"] == "Failed"
    assert argocd_health(stalled)[0] == "Degraded"

    fine, _ = applied_app(kube, namespace, unique, "2")  # the operator carries on
    assert exists(kube, "statefulset", f"{fine}-driver", namespace)
