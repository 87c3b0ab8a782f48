"""Uninstalling and upgrading the Helm chart: the CRDs kept, then upgraded as
docs/upgrading.md says.

Test plan:
- `helm uninstall` keeps the CRDs it installed from the chart's crds/ (deleting them would
  delete every Topic, Table and App), and the objects of their kinds. The stack's CRDs are
  shared by the session (installed by the `crds` fixture), so Helm could never own them: the
  test installs a copy of the chart whose crds/ serve a group of the test's own, CRDs that Helm
  creates, and deletes them afterwards.
- an upgrade follows docs/upgrading.md, on the node with the locally built operator image, with
  CRDs of a group of its own as above: a release installed from a chart whose Topic CRD lacks a
  field (deletionPolicy) refuses an object using it (server-side apply), or stores it without
  (a create that does not validate strictly: pruned); `helm upgrade` alone leaves the CRDs as
  they were; `kubectl apply --server-side` of the new crds/ conflicts with the field manager
  `helm` (its create owns `.spec.versions`) unless forced; forced, the field is served and kept,
  and `helm upgrade` with a changed value rolls the Deployment out (revision 3 deployed, its pod
  Ready with the new setting). The object made before was never rewritten (same
  resourceVersion) and reads with the new field's default.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from rillet_devstack import stack as devstack

from .conftest import Kube
from .helmcharts import (
    ANY,
    CHART,
    helm,
)
from .objects import exists, get, topic
from .polling import wait_for


def _copied(name: str) -> str:
    """A resource name of the chart copies' CRDs (`topics`: `copiedtopics`)."""
    return f"copied{name}"


def _chart_serving(
    group: str, directory: Path, *, edit: Callable[[dict[str, Any]], None] | None = None
) -> Path:
    """A copy of the chart, in `directory`, whose CRDs (its crds/, as shipped, then changed by
    `edit`) serve `group`, not rillet.io."""
    chart = directory / "rillet"
    shutil.copytree(CHART, chart)
    for path in (chart / "crds").glob("*.yaml"):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        # Names of their own too: kubectl resolves `table`, `tables`, `rt` or the category
        # `rillet` across every group, so a test running meanwhile that typed `kubectl patch
        # table x` could reach these instead of Rillet's, and fail once they are gone.
        names = crd["spec"]["names"]
        names["plural"], names["singular"] = _copied(names["plural"]), _copied(names["singular"])
        names.pop("categories", None)
        names.pop("shortNames", None)
        crd["metadata"]["name"] = f"{names['plural']}.{group}"
        crd["spec"]["group"] = group
        if edit is not None:
            edit(crd)
        path.write_text(yaml.safe_dump(crd), encoding="utf-8")
    return chart


def test_uninstall_keeps_the_crds_helm_installed(
    kube: Kube, new_namespace: Callable[..., str], kafka_prefix: str, tmp_path: Path
) -> None:
    group = f"{kafka_prefix}.test.rillet.io"
    crds = [f"{_copied(plural)}.{group}" for plural in ("apps", "tables", "topics")]
    chart = _chart_serving(group, tmp_path)
    namespace = new_namespace()
    try:
        assert not any(exists(kube, "crd", crd, "default") for crd in crds)
        helm(kube, "install", "rillet", str(chart), "--namespace", namespace, *ANY)
        kube.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{c}" for c in crds)
        )
        kept = topic("kept", namespace) | {"apiVersion": f"{group}/v1alpha1"}
        kube.kubectl("apply", "-f", "-", input=json.dumps(kept))

        helm(kube, "uninstall", "rillet", "--namespace", namespace)

        assert "rillet" not in helm(kube, "list", "-q", "--namespace", namespace).stdout.split()
        for crd in crds:
            assert exists(kube, "crd", crd, "default"), f"helm uninstall deleted CRD {crd}"
        assert exists(kube, f"{_copied('topics')}.{group}", "kept", namespace)
    finally:
        kube.kubectl("delete", "crd", *crds, "--ignore-not-found", "--timeout=60s", check=False)


def _an_older_topic_crd(crd: dict[str, Any]) -> None:
    """The Topic CRD as an older release shipped it: without spec.deletionPolicy, the field the
    chart's has gained since."""
    if crd["spec"]["names"]["kind"] == "Topic":
        (version,) = crd["spec"]["versions"]
        del version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
            "deletionPolicy"
        ]


def _apply_as_a_user(kube: Kube, manifest: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """`kubectl apply --server-side` of `manifest`; the finished command, failed or not."""
    return kube.kubectl(
        *("apply", "--server-side", "--field-manager=tests", "-f", "-"),
        input=json.dumps(manifest),
        check=False,
    )


def _spec_fields(kube: Kube, crd: str) -> set[str]:
    """The spec fields the CRD's (only) version declares."""
    (version,) = get(kube, "crd", crd, "default")["spec"]["versions"]
    return set(version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])


def test_upgrade_applies_the_new_crds_then_upgrades_the_release(
    kube: Kube,
    stack: devstack.StackState,
    operator_image: str,
    new_namespace: Callable[..., str],
    kafka_prefix: str,
    tmp_path: Path,
) -> None:
    group = f"{kafka_prefix}.test.rillet.io"
    crds = [f"{_copied(plural)}.{group}" for plural in ("apps", "tables", "topics")]
    topics = f"{_copied('topics')}.{group}"
    older = _chart_serving(group, tmp_path / "older", edit=_an_older_topic_crd)
    chart = _chart_serving(group, tmp_path / "current")
    namespace = new_namespace()
    repository, tag = operator_image.rsplit(":", 1)
    values = [
        *("--namespace", namespace, "--wait", "--timeout=240s"),
        *("--set", f"image.repository={repository}", "--set", "image.pullPolicy=Never"),
        *("--set-string", f"image.tag={tag}"),  # a content hash of digits alone: no number
        *("--set", f"kafka.bootstrapServers={stack.kafka_bootstrap}"),
        *("--set", f"watchNamespaces={{{namespace}}}"),  # nothing of the session's
    ]

    def of_group(name: str, **spec: Any) -> dict[str, Any]:
        return topic(name, namespace, **spec) | {"apiVersion": f"{group}/v1alpha1"}

    try:
        helm(kube, "install", "rillet", str(older), *values)
        _assert_rolled_out_with(kube, namespace, {"RILLET_RESYNC_SECONDS": "30"})
        early = of_group("early", partitions=2, deletionPolicy="Delete")
        refused = _apply_as_a_user(kube, early)
        assert ".spec.deletionPolicy: field not declared in schema" in refused.stderr, refused
        # A plain create (no server-side apply) that does not ask for strict validation: the
        # apiserver warns, and stores the object without the field.
        created = kube.kubectl("create", "--validate=warn", "-f", "-", input=json.dumps(early))
        assert 'unknown field "spec.deletionPolicy"' in created.stderr, created
        stored = get(kube, topics, "early", namespace)
        assert stored["spec"] == {"partitions": 2}

        # Without the first step of the path: Helm leaves the CRDs as they are.
        helm(kube, "upgrade", "rillet", str(chart), *values)
        assert "deletionPolicy" not in _spec_fields(kube, topics)

        # The path: the new CRDs, server-side; forced, as Helm's create left `.spec.versions`
        # (an atomic list: every schema) owned by the field manager `helm`.
        conflict = kube.kubectl("apply", "--server-side", "-f", str(chart / "crds"), check=False)
        assert 'conflict with "helm"' in conflict.stderr, conflict
        kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(chart / "crds"))
        late = of_group("late", deletionPolicy="Delete")
        wait_for(
            lambda: _apply_as_a_user(kube, late).returncode == 0,
            timeout=30,
            what="the apiserver to serve the new Topic schema",
        )
        helm(kube, "upgrade", "rillet", str(chart), *values, "--set", "operator.resyncSeconds=20")

        assert get(kube, topics, "late", namespace)["spec"]["deletionPolicy"] == "Delete"
        kept = get(kube, topics, "early", namespace)
        assert kept["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
        # Never rewritten, and read with the new field's default (what was pruned stays lost).
        assert kept["spec"] == {"partitions": 2, "deletionPolicy": "Retain"}
        history = json.loads(helm(kube, "history", "rillet", "-n", namespace, "-o=json").stdout)
        assert [(r["revision"], r["status"]) for r in history] == [
            (1, "superseded"),
            (2, "superseded"),
            (3, "deployed"),
        ]
        _assert_rolled_out_with(kube, namespace, {"RILLET_RESYNC_SECONDS": "20"})
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            helm(kube, "uninstall", "rillet", "--namespace", namespace, "--wait")
        kube.kubectl("delete", "crd", *crds, "--ignore-not-found", "--timeout=60s", check=False)


def _assert_rolled_out_with(kube: Kube, namespace: str, env: dict[str, str]) -> None:
    """The operator Deployment's latest template sets `env`, and its ready pods all run it."""
    deployment = get(kube, "deployment", "rillet-operator", namespace)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert {e["name"]: e.get("value") for e in container["env"]}.items() >= env.items()
    replicas = deployment["spec"]["replicas"]

    def rolled_out() -> bool:
        # Polled: `helm --wait` saw the replicas ready, and a CI run (load 7 on 2 cores) then
        # found one unready (MinimumReplicasUnavailable) a moment later. The claim is that the
        # rollout ends with every replica on the new template, not that none ever blinks.
        deployment = get(kube, "deployment", "rillet-operator", namespace)
        status = deployment["status"]
        return bool(
            status["observedGeneration"] == deployment["metadata"]["generation"]
            and status.get("updatedReplicas") == status.get("readyReplicas") == replicas
        )

    wait_for(rolled_out, timeout=120, interval=1, what=f"{replicas} ready replicas, all updated")
    pods = kube.api.list("pod", namespace)
    running = [p for p in pods if "deletionTimestamp" not in p["metadata"]]
    assert len(running) == replicas
    for pod in running:
        (container,) = pod["spec"]["containers"]
        assert {e["name"]: e.get("value") for e in container["env"]}.items() >= env.items()
