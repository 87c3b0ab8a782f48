"""The Helm chart installs a working operator with exactly the rights it needs (what it renders:
test_chart_rendering.py; uninstall and upgrade: test_chart_upgrades.py).

Test plan:
- `helm install` on the real apiserver creates the ServiceAccount, RBAC and Deployment; the
  Deployment gets a (Pending: no kubelet here) Pod wired to the Kafka settings and the
  credentials Secret, never to a literal password.
- the operator, run with the chart's ServiceAccount token (its RBAC, nothing more), reconciles
  a Topic to Ready, with status and Events written, and an App: its objects applied (its
  driver's RoleBinding binds the release's driver ClusterRole, which the operator may `bind`
  without holding its rights), its pods read by the scaling loop and the desired count written
  on its driver pod; so it does when the chart watches a namespace by name and grants a Role there
  (the scaling loop then lists pods in that namespace, not cluster-wide).
- a release listing namespaces, with its operator's real token, can do what it does in the
  namespace it lists and nothing in another (`kubectl auth can-i`, one request at a time and
  `--list`); so can a release installed without watch values in its own namespace, the only
  one holding its Role and the one its operator is told to watch; neither may create a Role or
  a pod, or bind a ClusterRole but the driver's;
- the operator's token gets, lists and watches no Secret; the chart's admission policy holds
  its Secret writes, with its real token, to the Secrets it makes: a Secret `other` is refused
  with the policy's message, one named `<name>-spark-auth` is refused without the managed-by
  label and admitted with it; and so its reads, made by a patch that changes nothing: refused
  for a user's Secret of another name or without the label (its value nowhere in the answer),
  the Secret itself for one of its names and label;
- watchAnyNamespace beside listed namespaces is refused at install, naming the value, and
  nothing is installed;
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from rillet_devstack import stack as devstack
from rillet_devstack.controlplane import write_service_account_kubeconfig

from .conftest import Kube
from .helmcharts import (
    ANY,
    CHART,
    HelmError,
    helm,
    operator_env,
    reconcile_as_the_charts_operator,
)
from .objects import apply, get
from .polling import wait_for


@pytest.fixture
def release(kube: Kube, crds: None, new_namespace: Callable[..., str]) -> Iterator[str]:
    namespace = new_namespace()
    helm(
        kube,
        "install",
        "rillet",
        str(CHART),
        "--namespace",
        namespace,
        "--set",
        "kafka.bootstrapServers=kafka.example:9092",
        "--set",
        "kafka.securityProtocol=SASL_SSL",
        "--set",
        "kafka.saslMechanism=SCRAM-SHA-512",
        "--set",
        "kafka.credentialsSecret=kafka-credentials",
        "--set",
        "watchNamespaces={team-*}",
    )
    yield namespace
    helm(kube, "uninstall", "rillet", "--namespace", namespace)


def test_install_creates_a_wired_operator_deployment(kube: Kube, release: str) -> None:
    pods = wait_for(
        lambda: kube.api.list("pod", release),
        timeout=60,
        what="the operator's Pod object",
    )
    container = pods[0]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["RILLET_KAFKA_BOOTSTRAP"]["value"] == "kafka.example:9092"
    assert env["RILLET_KAFKA_SASL_MECHANISM"]["value"] == "SCRAM-SHA-512"
    # The login as files of the Secret: nothing of it in the environment.
    assert not {"RILLET_KAFKA_SASL_USERNAME", "RILLET_KAFKA_SASL_PASSWORD"} & set(env)
    login = env["RILLET_KAFKA_CREDENTIALS_DIR"]["value"]
    (mount,) = (m for m in container["volumeMounts"] if m["mountPath"] == login)
    (volume,) = (v for v in pods[0]["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "kafka-credentials"
    assert env["RILLET_NAMESPACES"]["value"] == "team-*"
    assert pods[0]["spec"]["serviceAccountName"] == "rillet-operator"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


@pytest.fixture
def listed_release(
    kube: Kube, crds: None, new_namespace: Callable[..., str]
) -> Iterator[tuple[str, str]]:
    """The chart installed to watch one namespace by name (its rights there are a Role), with
    its Deployment scaled to zero: the test runs the operator itself, as its ServiceAccount."""
    namespace, watched = new_namespace(), new_namespace()
    watch = f"watchNamespaces={{{watched}}}"
    helm(kube, "install", "rillet", str(CHART), "--namespace", namespace, "--set", watch)
    kube.kubectl("scale", "deployment/rillet-operator", "--replicas=0", "-n", namespace)
    yield namespace, watched
    helm(kube, "uninstall", "rillet", "--namespace", namespace)


def test_operator_works_with_exactly_the_charts_rbac(
    kube: Kube,
    release: str,
    stack: devstack.StackState,
    new_namespace: Callable[..., str],
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    reconcile_as_the_charts_operator(
        kube, stack, release, new_namespace(), kafka_prefix=kafka_prefix, tmp_path=tmp_path
    )


def test_operator_works_with_a_role_in_each_listed_namespace(
    kube: Kube,
    listed_release: tuple[str, str],
    stack: devstack.StackState,
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    release, watched = listed_release
    reconcile_as_the_charts_operator(
        kube, stack, release, watched, kafka_prefix=kafka_prefix, tmp_path=tmp_path
    )


# What the operator does in a namespace it watches (rbac.yaml's namespaced rules), as
# `kubectl auth can-i` arguments.
OPERATOR_REQUESTS = (
    ("patch", "topics.rillet.io"),
    ("patch", "apps.rillet.io/status"),
    ("patch", "pods"),
    ("delete", "pods"),
    ("create", "statefulsets.apps"),
    ("patch", "configmaps"),
    ("create", "rolebindings.rbac.authorization.k8s.io"),
    ("delete", "networkpolicies.networking.k8s.io"),
    ("create", "events"),
)


def test_a_release_listing_namespaces_cannot_touch_another(
    kube: Kube, listed_release: tuple[str, str], new_namespace: Callable[..., str], tmp_path: Path
) -> None:
    """The chart's operator, with its real ServiceAccount token: in the namespace it lists, what
    it does; in any other, nothing (the cluster-wide reads of namespaces, CRDs and nodes only)."""
    release, watched = listed_release
    _assert_only_watched_reached(kube, release, watched, new_namespace(), tmp_path)


def test_the_operators_secret_reads_and_writes_are_held_to_the_secrets_it_makes(
    kube: Kube, listed_release: tuple[str, str], tmp_path: Path
) -> None:
    """RBAC lets the operator create and patch any Secret of a namespace it watches, and get
    none; the chart's admission policy (templates/operatorsecrets.yaml) holds its writes, and
    the patches by which it reads its own, with its real token, to the names and label of the
    Secrets it makes."""
    release, watched = listed_release
    as_operator = _as_operator(kube, release, tmp_path)

    def create(name: str, labels: dict[str, str]) -> str:
        """What the apiserver answers the operator (dry run: nothing is made)."""
        metadata: dict[str, Any] = {"name": name, **({"labels": labels} if labels else {})}
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": metadata}
        result = as_operator.kubectl(
            *("create", "--dry-run=server", "-n", watched, "-f", "-"),
            input=json.dumps(secret),
            check=False,
        )
        return "allowed" if result.returncode == 0 else result.stderr

    managed = {"app.kubernetes.io/managed-by": "rillet"}
    answer = as_operator.kubectl("auth", "can-i", "create", "secrets", "-n", watched, check=False)
    assert answer.stdout.strip() == "yes"  # RBAC: any name

    def refusal() -> str | None:
        said = create("other", managed)
        return None if said == "allowed" else said

    refused = wait_for(refusal, timeout=60, what="the operator's Secret policy in force")
    assert (
        "the Rillet operator writes only the Secrets it makes for Apps and Tables (named "
        "<name>-kafka, <name>-spark-auth or <name>-schema-registry): not other"
    ) in refused, refused
    assert create("x-spark-auth", managed) == "allowed"
    unlabelled = create("x-spark-auth", {})
    assert "labelled app.kubernetes.io/managed-by=rillet" in unlabelled, unlabelled

    # Reads: no `get`; a patch that changes nothing (how the operator reads its own) returns a
    # Secret of its names and label, and is refused any other, so nothing of it comes back.
    password = f"p-{uuid.uuid4().hex}"
    for name, labels in (("team-db", managed), ("y-kafka", {}), ("y-spark-auth", managed)):
        apply(kube, _secret(name, watched, labels, password))

    def patch_read(name: str) -> dict[str, Any]:
        test = [{"op": "test", "path": "/metadata/name", "value": name}]
        return as_operator.api.json_patch("secret", name, watched, test)

    denied = as_operator.kubectl("get", "secret", "team-db", "-n", watched, check=False)
    assert "forbidden" in denied.stderr.lower(), denied.stderr
    for name in ("team-db", "y-kafka"):
        with pytest.raises(ApiException) as refused_read:
            patch_read(name)
        assert refused_read.value.status == 422, refused_read.value
        said = str(refused_read.value.body)
        assert "the Rillet operator writes only the Secrets it makes" in said, said
        assert password not in said
        assert base64.b64encode(password.encode()).decode() not in said
    before = get(kube, "secret", "y-spark-auth", watched)["metadata"]["resourceVersion"]
    own = patch_read("y-spark-auth")
    assert base64.b64decode(own["data"]["key"]).decode() == password
    # Read, not written: the apiserver stored nothing (the same version).
    assert own["metadata"]["resourceVersion"] == before
    assert get(kube, "secret", "y-spark-auth", watched)["metadata"]["resourceVersion"] == before


def _secret(name: str, namespace: str, labels: dict[str, str], value: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    data = {"key": base64.b64encode(value.encode()).decode()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "data": data}


def _as_operator(kube: Kube, release: str, tmp_path: Path) -> Kube:
    """The cluster as the release's operator sees it: with its ServiceAccount's real token."""
    return Kube(
        kubeconfig=write_service_account_kubeconfig(
            kube.kubeconfig,
            tmp_path / "operator.kubeconfig",
            namespace=release,
            name="rillet-operator",
        )
    )


def _assert_only_watched_reached(
    kube: Kube, release: str, watched: str, unwatched: str, tmp_path: Path
) -> None:
    """The release's operator, with its real ServiceAccount token, may do what it does in
    `watched` and nothing in `unwatched` (the cluster-wide reads only)."""
    as_operator = _as_operator(kube, release, tmp_path)

    def can_i(*args: str) -> bool:
        answer = as_operator.kubectl("auth", "can-i", *args, check=False).stdout.strip()
        assert answer in ("yes", "no"), answer
        return answer == "yes"

    # Binding the driver ClusterRole: that one alone, where the operator watches.
    driver_role = f"clusterroles.rbac.authorization.k8s.io/{release}-rillet-operator-driver"
    for verb, resource in (*OPERATOR_REQUESTS, ("bind", driver_role)):
        assert can_i(verb, resource, "-n", watched), (verb, resource)
        assert not can_i(verb, resource, "-n", unwatched), (verb, resource)
    # No Role made, no pod created (the drivers' rights are the driver ClusterRole's, bound),
    # no other ClusterRole bound.
    # No Secret read by get, list or watch (its own come back from a patch: k8s.ownsecrets).
    for verb, resource in (
        ("create", "roles.rbac.authorization.k8s.io"),
        ("create", "pods"),
        ("bind", "clusterroles.rbac.authorization.k8s.io/admin"),
        ("get", "secrets"),
        ("list", "secrets"),
        ("watch", "secrets"),
    ):
        assert not can_i(verb, resource, "-n", watched), (verb, resource)
    for verb, resource in (
        ("get", "secrets"),
        ("list", "secrets"),
        ("create", "roles.rbac.authorization.k8s.io"),
    ):
        assert not can_i(verb, resource, "-n", unwatched), (verb, resource)
    # kube-system's uid is this cluster's id in App principals' names (read at start-up).
    assert can_i("get", "namespaces/kube-system")
    listed = as_operator.kubectl("auth", "can-i", "--list", "-n", unwatched).stdout
    granted = {line.split()[0] for line in listed.splitlines()[1:] if line.strip()}
    # Cluster-wide reads (namespaces, CRDs, nodes) and what every authenticated user may do.
    assert granted <= {
        "namespaces",
        "customresourcedefinitions.apiextensions.k8s.io",
        "nodes",
        "selfsubjectreviews.authentication.k8s.io",
        "selfsubjectaccessreviews.authorization.k8s.io",
        "selfsubjectrulesreviews.authorization.k8s.io",
        "[/.well-known/openid-configuration/]",
        "[/.well-known/openid-configuration]",
        "[/api/*]",
        "[/api]",
        "[/apis/*]",
        "[/apis]",
        "[/healthz]",
        "[/livez]",
        "[/openapi/*]",
        "[/openapi]",
        "[/openid/v1/jwks/]",
        "[/openid/v1/jwks]",
        "[/readyz]",
        "[/version/]",
        "[/version]",
    }, listed


def _roles_of(kube: Kube, release: str) -> list[str]:
    """The namespaces holding the Role that grants the release's operator its rights (named
    after the release's namespace, as its ClusterRole is), wherever it is."""
    named = f"metadata.name={release}-rillet-operator"
    return sorted(role["metadata"]["namespace"] for role in kube.api.list("role", fields=named))


def test_a_default_install_watches_its_own_namespace_alone(
    kube: Kube, new_namespace: Callable[..., str], tmp_path: Path
) -> None:
    """No watch values: a Role in the release's namespace and nowhere else, the operator told
    to watch that namespace, and nothing it may do in another. No `crds` fixture: the stack's
    CRDs exist, so Helm leaves them as they are."""
    release, other = new_namespace(), new_namespace()
    helm(kube, "install", "rillet", str(CHART), "--namespace", release)
    try:
        kube.kubectl("scale", "deployment/rillet-operator", "--replicas=0", "-n", release)
        assert _roles_of(kube, release) == [release]
        env = operator_env([get(kube, "deployment", "rillet-operator", release)])
        assert env["RILLET_NAMESPACES"]["value"] == release
        _assert_only_watched_reached(kube, release, release, other, tmp_path)
    finally:
        helm(kube, "uninstall", "rillet", "--namespace", release)


def test_watch_any_namespace_beside_listed_namespaces_is_refused_at_install(
    kube: Kube, new_namespace: Callable[..., str]
) -> None:
    release = new_namespace()
    with pytest.raises(HelmError) as refused:
        helm(
            *(kube, "install", "rillet", str(CHART), "--namespace", release, *ANY),
            *("--set", f"watchNamespaces={{{release}}}"),
        )
    assert "at '/watchAnyNamespace': value must be false" in refused.value.stderr
    assert "rillet" not in helm(kube, "list", "-q", "--namespace", release).stdout.split()
    cluster_role = f"clusterrole/{release}-rillet-operator"
    assert not kube.kubectl("get", cluster_role, "--ignore-not-found", "-o=name").stdout
