"""The operator runs every App: its objects, its references, its driver's rights, its scaling.

These need no running pod (the driver pod may stay Pending): what is checked is what the
operator writes, and the apiserver's own answers.

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
- the driver's real ServiceAccount token (bound to the chart's driver ClusterRole) can create
  and delete pods and watch its own pod in its namespace, where the operator writes its desired
  executor count, and cannot read Secrets, create Roles, touch another namespace, or read any
  App;
- with the chart's driver pod policy, that token creates only its App's executor pods (no
  token, host path or privileged container) and deletes or changes no other App's pod, where
  RBAC alone lets it create any pod;
- a Table applied together with the App that writes it is Ready within seconds, with the App's
  input partitions, under an operator whose resync is 5 minutes away (also when the Table was
  already waiting when the App came);
- a spec a builder refuses (a Table input without a schema) is Stalled (InvalidSpec) with the
  reason, and the operator carries on;
- suspend: the StatefulSet goes to 0 replicas, the App is Suspended (Argo CD: Suspended, not
  Progressing; no condition True); resuming brings the driver back;
- scaling without pods: the executor cap follows the input partitions (a Topic grown from 2 to
  6 partitions raises it within seconds); lag committed to the App's consumer group raises the
  desired count (never past the cap) and, once drained, lowers it after the stabilization
  window, with an ExecutorsScaled Event per change; the operator's quota of executors per App
  caps the desired count below the partitions' cap, and the Event says so.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from rillet.runtime.pod import incluster
from rillet_devstack.controlplane import write_service_account_kubeconfig
from rillet_devstack.operating import OperatorProcess

from . import driverpolicy
from .conftest import Kube
from .gitopshealth import argocd_health
from .kafka_reads import kafka_partitions
from .objects import (
    app,
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


Names = Callable[[str], str]


@pytest.fixture
def names(kafka_prefix: str) -> Names:
    """Object names of the test: under its Kafka prefix, so its topics are cleaned up."""
    return lambda what: f"{kafka_prefix}-{what}"


def applied_app(
    kube: Kube, namespace: str, names: Names, suffix: str = "", **spec: Any
) -> tuple[str, dict[str, Any]]:
    """A Topic, a Table and the App between them, applied; the App once past its references."""
    words, counts, name = names(f"words{suffix}"), names(f"counts{suffix}"), names(f"app{suffix}")
    apply(
        kube,
        topic(words, namespace, partitions=spec.pop("partitions", 2)),
        table(counts, namespace),
        app(name, namespace, reads=words, writes=counts, **spec),
    )
    found = wait_for(
        lambda: (
            (obj := get(kube, "app", name, namespace)).get("status", {}).get("executors")
            and condition(obj, "Ready").get("reason") not in (None, "WaitingForTopics")
            and obj
        ),
        timeout=60,
        what=f"App {name} past its references",
    )
    return name, found


def absent(kube: Kube, kind: str, name: str, namespace: str) -> bool:
    return not exists(kube, kind, name, namespace)


def owner_of(kube: Kube, kind: str, name: str, namespace: str) -> list[tuple[str, str, bool]]:
    refs = get(kube, kind, name, namespace)["metadata"].get("ownerReferences") or []
    return [(r["kind"], r["uid"], bool(r.get("controller"))) for r in refs]


@pytest.mark.usefixtures("operator")
def test_objects_are_owned_by_the_app_and_go_with_it(
    kube: Kube, namespace: str, names: Names
) -> None:
    name, obj = applied_app(kube, namespace, names)
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
    kube: Kube, namespace: str, names: Names
) -> None:
    """An App made by an older release has a Role `<app>-driver` and a RoleBinding to it; the
    operator binds the driver ClusterRole instead and deletes those two, when the App's."""
    name, upgraded = applied_app(kube, namespace, names)
    other, stranger = applied_app(kube, namespace, names, suffix="-b")
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
    kube: Kube, namespace: str, names: Names
) -> None:
    words, counts, name = names("later"), names("counts"), names("waiter")
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
def test_a_driver_that_fits_no_node_says_why(kube: Kube, namespace: str, names: Names) -> None:
    name, _ = applied_app(kube, namespace, names, driver={"cpu": "64", "memory": "1Gi"})
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


def can_i(kubeconfig: Path, *args: str) -> bool:
    kube = Kube(kubeconfig=kubeconfig)
    result = kube.kubectl("auth", "can-i", *args, check=False)
    answer = result.stdout.strip()
    assert answer.startswith(("yes", "no")), (answer, result.stderr)
    return answer.startswith("yes")


@pytest.mark.usefixtures("operator")
def test_driver_service_account_has_exactly_its_rights(
    kube: Kube, namespace: str, names: Names, tmp_path: Path
) -> None:
    name, _ = applied_app(kube, namespace, names)
    wait_for(
        lambda: exists(kube, "rolebinding", f"{name}-driver-rights", namespace),
        what="RoleBinding",
    )
    driver = write_service_account_kubeconfig(
        kube.kubeconfig, tmp_path / "driver.kubeconfig", namespace=namespace, name=f"{name}-driver"
    )
    other = f"t-{uuid.uuid4().hex[:10]}"  # never created: rights are checked, not objects

    assert can_i(driver, "create", "pods", "-n", namespace)
    assert can_i(driver, "delete", "pods", "-n", namespace)
    assert can_i(driver, "patch", "pods", "-n", namespace)
    assert can_i(driver, "create", "configmaps", "-n", namespace)
    assert not can_i(driver, "get", f"apps.rillet.io/{name}", "-n", namespace)
    assert not can_i(driver, "get", "secrets", "-n", namespace)
    assert not can_i(driver, "list", "secrets", "-n", namespace)
    assert not can_i(driver, "create", "pods", "-n", other)
    assert not can_i(driver, "get", "pods", "-n", other)
    assert not can_i(driver, "get", "apps.rillet.io/someone-else", "-n", namespace)
    assert not can_i(driver, "patch", f"apps.rillet.io/{name}", "-n", namespace)
    assert not can_i(driver, "create", "roles", "-n", namespace)
    assert not can_i(driver, "create", "rolebindings", "-n", namespace)
    assert not can_i(driver, "list", "nodes")
    # The driver's watch of its own pod (a field selector on its name), with its own token:
    # the operator writes there the count it decided, as in the App's status.
    pod = f"{name}-driver-0"
    wait_for(lambda: exists(kube, "pod", pod, namespace), what=f"pod {pod}")
    seen = wait_for(
        lambda: _watched_count(driver, namespace, pod),
        timeout=60,
        what="the desired executor count on the driver pod",
    )
    status = get(kube, "app", name, namespace)["status"]["executors"]
    assert seen == status["desired"] >= 1, (seen, status)
    with pytest.raises(ApiException) as refused:
        _watched_count(driver, other, pod)
    assert refused.value.status == 403


@pytest.mark.usefixtures("operator")
def test_the_chart_holds_a_drivers_pod_requests_to_its_own_executors(
    kube: Kube, namespace: str, names: Names, tmp_path: Path
) -> None:
    """RBAC lets a driver create and delete any pod of its namespace; the chart's admission
    policy (installed with the session's operator, `driverpolicy`) holds it to its App's
    executors, with its real token."""
    name, _ = applied_app(kube, namespace, names)
    wait_for(
        lambda: exists(kube, "rolebinding", f"{name}-driver-rights", namespace),
        what="RoleBinding",
    )
    as_driver = Kube(
        kubeconfig=write_service_account_kubeconfig(
            kube.kubeconfig,
            tmp_path / "driver.kubeconfig",
            namespace=namespace,
            name=f"{name}-driver",
        )
    )
    theirs = kube.kubectl(
        "create",
        "-n",
        namespace,
        "-o",
        "name",
        "-f",
        "-",
        input=json.dumps(driverpolicy.pod("other")),
    ).stdout.strip()

    def attempt(*args: str, manifest: dict[str, Any] | None = None) -> str:
        """What the apiserver answers the driver (dry run: nothing is made or deleted)."""
        result = as_driver.kubectl(
            *args,
            "--dry-run=server",
            "-n",
            namespace,
            *(("-f", "-") if manifest else ()),
            input=json.dumps(manifest) if manifest else None,
            check=False,
        )
        return "allowed" if result.returncode == 0 else result.stderr

    hostpath: list[dict[str, Any]] = [{"name": "root", "hostPath": {"path": "/"}}]
    kube.kubectl("create", "serviceaccount", "someone-else", "-n", namespace)
    assert can_i(as_driver.kubeconfig, "create", "pods", "-n", namespace)  # RBAC: any pod
    wait_for(
        lambda: "only its own App" in attempt("create", manifest=driverpolicy.pod("other")),
        timeout=60,
        what="the admission policy in force",
    )
    assert attempt("create", manifest=driverpolicy.pod(name)) == "allowed"
    refusals = {
        "a driver pod": driverpolicy.pod(name, role="driver"),
        "with a token": driverpolicy.pod(name, automountServiceAccountToken=True),
        "on the host": driverpolicy.pod(name, volumes=hostpath),
        "privileged": driverpolicy.pod(
            name,
            initContainers=[{"name": "i", "image": "x", "securityContext": {"privileged": True}}],
        ),
        "as another account": driverpolicy.pod(name, serviceAccountName="someone-else"),
        "with a projected token": driverpolicy.pod(
            name,
            volumes=[
                {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}
            ],
        ),
        "mounting a Secret": driverpolicy.pod(
            name, volumes=[{"name": "s", "secret": {"secretName": "other-kafka"}}]
        ),
        "with another App's key": driverpolicy.pod(name, containers=[_reading("other-spark-auth")]),
    }
    said = {what: attempt("create", manifest=manifest) for what, manifest in refusals.items()}
    assert "may create only executor pods" in said["a driver pod"], said
    assert "mounts no ServiceAccount token" in said["with a token"], said
    assert "mounts no host path" in said["on the host"], said
    assert "runs no privileged container" in said["privileged"], said
    assert "runs as its App's ServiceAccount" in said["as another account"], said
    assert "no projected volume" in said["with a projected token"], said
    assert "mounts no Secret" in said["mounting a Secret"], said
    assert "no Secret that Rillet made for another App" in said["with another App's key"], said
    # Its own key, and Secrets Rillet did not make, are the App's to read.
    for secret in (f"{name}-spark-auth", "objectstore"):
        reading = driverpolicy.pod(name, containers=[_reading(secret)])
        assert attempt("create", manifest=reading) == "allowed", secret
    assert "only its own App" in attempt("delete", theirs)
    assert "only its own App" in attempt("label", theirs, "x=y")
    # Relabelled into this App in the same change: judged by the pod before it too.
    assert "change only its own App" in attempt(
        "label", "--overwrite", theirs, f"rillet.io/app={name}"
    )


def _reading(secret: str) -> dict[str, Any]:
    """A container reading a key of Secret `secret` into its environment."""
    ref = {"secretKeyRef": {"name": secret, "key": "k"}}
    return {"name": "c", "image": "x", "env": [{"name": "K", "valueFrom": ref}]}


def _watched_count(kubeconfig: Path, namespace: str, pod: str) -> int | None:
    """The first desired executor count the driver's watch of pod `pod` sees."""
    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    access = incluster.KubeAccess(api, namespace=namespace, pod_name=pod)
    try:
        return next(access.watch_desired(timeout_seconds=5))
    finally:
        access.close()


def ready_seconds(kube: Kube, name: str, namespace: str, started: float) -> float:
    wait_condition(kube, "table", name, namespace, timeout=60)
    return time.monotonic() - started


def test_table_applied_with_its_writer_is_ready_within_seconds(
    kube: Kube,
    names: Names,
    kafka_admin: AdminClient,
    lone_operator: Callable[..., OperatorProcess],
    measurement: Callable[[str], None],
) -> None:
    own = lone_operator(resync_seconds=300)  # a Table waiting for the resync would show
    own.start()
    namespace = own.namespace_pattern
    words, counts, name = names("words"), names("counts"), names("writer")
    apply(kube, topic(words, namespace, partitions=3))
    wait_condition(kube, "topic", words, namespace)  # the operator is up: time only what follows
    started = time.monotonic()
    apply(kube, table(counts, namespace), app(name, namespace, reads=words, writes=counts))
    together = ready_seconds(kube, counts, namespace, started)
    measurement(f"Table Ready {together:.1f} s after being applied with its writer App")
    assert together < 15
    assert kafka_partitions(kafka_admin, counts) == 3

    later_counts, later = names("counts2"), names("writer2")
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
    kube: Kube, new_namespace: Callable[..., str], names: Names
) -> None:
    """The Pod Security level of the namespace: unset, a Warning as the driver is created; the
    restricted level enforced, none, and the driver pod is admitted under it."""
    loose, restricted = new_namespace(), new_namespace()
    kube.kubectl("label", "namespace", restricted, "pod-security.kubernetes.io/enforce=restricted")
    apps = {loose: applied_app(kube, loose, names)[0]}
    apps[restricted] = applied_app(kube, restricted, names, "2")[0]

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
    kube: Kube, namespace: str, names: Names, kind: str
) -> None:
    name = names("app")
    kube.kubectl("create", "-f", "-", input=json.dumps(_theirs(kind, f"{name}-driver", namespace)))
    before = get(kube, kind.lower(), f"{name}-driver", namespace)
    words, counts = names("words"), names("counts")
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
    kube: Kube, namespace: str, names: Names
) -> None:
    words, counts, schemaless = names("words"), names("counts"), names("lookup")
    name = names("broken")
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

    fine, _ = applied_app(kube, namespace, names, "2")  # the operator carries on
    assert exists(kube, "statefulset", f"{fine}-driver", namespace)


def replicas(kube: Kube, name: str, namespace: str) -> int:
    return int(get(kube, "statefulset", f"{name}-driver", namespace)["spec"]["replicas"])


@pytest.mark.usefixtures("operator")
def test_suspend_stops_the_driver_and_resume_brings_it_back(
    kube: Kube, namespace: str, names: Names
) -> None:
    name, _ = applied_app(kube, namespace, names)
    assert replicas(kube, name, namespace) == 1

    kube.kubectl(
        "patch", "app", name, "-n", namespace, "--type=merge", "-p", '{"spec": {"suspend": true}}'
    )
    suspended = wait_condition(
        kube,
        "app",
        name,
        namespace,
        condition_type="Reconciling",
        status="False",
        reason="Suspended",
    )
    assert suspended["status"]["phase"] == "Suspended"
    # No Ready at all: Ready False would keep Flux's health checks waiting (docs/health.md).
    assert [condition(suspended, c).get("status") for c in ("Ready", "Reconciling", "Stalled")] == [
        None,
        "False",
        "False",
    ]
    assert argocd_health(suspended)[0] == "Suspended"
    assert replicas(kube, name, namespace) == 0

    kube.kubectl(
        "patch", "app", name, "-n", namespace, "--type=merge", "-p", '{"spec": {"suspend": false}}'
    )
    wait_for(lambda: replicas(kube, name, namespace) == 1, timeout=30, what="replicas back to 1")
    resumed = wait_for(
        lambda: (
            (obj := get(kube, "app", name, namespace))["status"].get("phase") != "Suspended"
            and obj["status"].get("observedGeneration") == obj["metadata"]["generation"]
            and obj
        ),
        timeout=30,
        what="the App no longer Suspended",
    )
    assert argocd_health(resumed)[0] != "Suspended"


def executors(kube: Kube, name: str, namespace: str) -> dict[str, Any]:
    return dict(get(kube, "app", name, namespace).get("status", {}).get("executors") or {})


def produce(bootstrap: str, topic_name: str, per_partition: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for partition in range(partitions):
        for i in range(per_partition):
            producer.produce(topic_name, value=f"w{i}".encode(), partition=partition)
        producer.poll(0)
    assert producer.flush(30) == 0


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit offsets to the App's group as its runtime does (never subscribing)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


@pytest.mark.usefixtures("operator")
def test_executors_follow_partitions_and_lag(
    kube: Kube, namespace: str, names: Names, kafka_bootstrap: str
) -> None:
    scaling = {
        "minExecutors": 1,
        "maxExecutors": 8,
        "lagTarget": 1000,
        "stabilizationWindowSeconds": 6,
    }
    name, obj = applied_app(kube, namespace, names, partitions=2, scaling=scaling)
    words = obj["spec"]["inputs"][0]["topicRef"]["name"]
    group = f"rillet.{namespace}.{name}"
    first = wait_for(
        lambda: (found := executors(kube, name, namespace)).get("cap") == 2 and found,
        timeout=30,
        what="executors capped at the 2 partitions",
    )
    assert first["desired"] == 1  # no lag known yet: minExecutors

    kube.kubectl(
        "patch",
        "topic",
        words,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"partitions": 6}}',
    )
    grown = time.monotonic()
    wait_for(
        lambda: executors(kube, name, namespace).get("cap") == 6,
        timeout=30,
        what="the cap raised to the 6 partitions",
    )
    assert time.monotonic() - grown < 15

    # 9,000 records behind over 6 partitions: lag 9,000 asks for 9 executors, the cap is 6.
    produce(kafka_bootstrap, words, per_partition=1500, partitions=6)
    commit(kafka_bootstrap, group, {(words, p): 0 for p in range(6)})
    capped = wait_for(
        lambda: (found := executors(kube, name, namespace)).get("desired") == 6 and found,
        timeout=60,
        what="desired executors up to the cap",
    )
    assert capped["cap"] == 6
    status = get(kube, "app", name, namespace)["status"]
    assert status["lag"] == 9000
    assert status["inputs"] == [{"name": "src", "topic": words, "partitions": 6, "lag": 9000}]

    commit(kafka_bootstrap, group, {(words, p): 1500 for p in range(6)})
    wait_for(
        lambda: executors(kube, name, namespace).get("desired") == 1,
        timeout=60,
        what="desired executors back to minExecutors once the lag is gone",
    )
    scaled = [e for e in events(kube, namespace, name) if e["reason"] == "ExecutorsScaled"]
    assert any("1 to 6" in e["message"] for e in scaled), [e["message"] for e in scaled]
    assert any("6 to 1" in e["message"] for e in scaled), [e["message"] for e in scaled]


def test_the_operators_quota_caps_an_apps_executors_and_says_so(
    kube: Kube,
    names: Names,
    kafka_bootstrap: str,
    lone_operator: Callable[..., OperatorProcess],
) -> None:
    own = lone_operator(settings={"RILLET_APP_MAX_EXECUTORS_PER_APP": "2"})
    own.start()
    namespace = own.namespace_pattern
    scaling = {"minExecutors": 1, "maxExecutors": 8, "lagTarget": 1000}
    name, obj = applied_app(kube, namespace, names, partitions=6, scaling=scaling)
    words = obj["spec"]["inputs"][0]["topicRef"]["name"]
    # 9,000 records behind over 6 partitions: the lag asks for 9, the partitions allow 6, the
    # operator's quota 2.
    produce(kafka_bootstrap, words, per_partition=1500, partitions=6)
    commit(kafka_bootstrap, f"rillet.{namespace}.{name}", {(words, p): 0 for p in range(6)})
    wait_for(
        lambda: executors(kube, name, namespace).get("desired") == 2,
        timeout=60,
        what="desired executors up to the quota",
    )
    scaled = [
        e["message"] for e in events(kube, namespace, name) if e["reason"] == "ExecutorsScaled"
    ]
    assert any("this operator allows 2 executors per App" in m for m in scaled), scaled
    assert executors(kube, name, namespace)["cap"] == 6
