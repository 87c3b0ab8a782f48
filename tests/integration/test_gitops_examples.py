"""The GitOps examples (examples/gitops): kustomize renders them, the apiserver takes them, the
operator reconciles them (the Flux and Argo CD objects are test_gitops_tools.py's).

Rendering is done by the stack's own tools, as a GitOps tool would do it: `kubectl kustomize`
(the kustomize built into the stack's kubectl) and `helm template` (for the chart values the
Flux HelmRelease and the Argo CD Application pass); only the apply tests need the stack. What a
test applies is moved by kustomize into a namespace of the test, and each Topic and Table is
given a Kafka topic under the test's prefix: the session's operator makes them only in the
namespaces of tests that use it (and deletes them with the objects, deletionPolicy Delete in
the base), and the `owned` fixture deletes any that is left.

Test plan:
- the base renders to exactly a Topic, a Table and an App, without a namespace, valid for the
  models (the rules the apiserver checks), the App reading the Topic and writing the Table.
- the production overlay renders the same three objects plus their Namespace, all in it and
  labelled, each patch in effect (partitions, replication, retention, deletionPolicy Retain,
  executors and their resources, the image) and every other field as in the base; the App's
  executors use at most one core per input partition.
- base/kustomizeconfig.yaml reaches the App from an overlay: a namePrefix renames the Topic
  and Table the App reads and writes along with them, and `images:` sets spec.image.
- the rendered overlay applies with server-side apply to the real apiserver, in a namespace
  no operator watches (its replication factor 3 needs 3 brokers); what it stores is what was
  rendered (plus defaults) and parses with the models.
- the rendered base, its App suspended (no Spark on the shared node), under the session's
  operator: the Topic and the Table become Ready (the Table with the partitions of the App's
  input) and the App Suspended; kstatus (Flux's `wait: true`) calls all three Current, and
  health.lua (Argo CD) Healthy, Healthy and Suspended.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from rillet.api.v1alpha1 import kinds

from . import gitopshealth
from .conftest import RILLET_KINDS, Kube
from .gitopsrendering import (
    BASE,
    FIELD_MANAGER,
    OVERLAY,
    Key,
    by_key,
    kustomize,
)
from .objects import wait_condition


def merged(base: Any, patch: Any) -> Any:
    """`patch` merged into `base` as a JSON merge patch: maps merge, anything else replaces."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return patch
    return {**base, **{key: merged(base.get(key), value) for key, value in patch.items()}}


def contains(big: Any, small: Any) -> bool:
    """Whether `big` has everything `small` has (extra keys in `big` are defaults)."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(
            key in big and contains(big[key], value) for key, value in small.items()
        )
    if isinstance(small, list):
        return (
            isinstance(big, list)
            and len(big) == len(small)
            and all(contains(b, s) for b, s in zip(big, small, strict=True))
        )
    return bool(big == small)


# --- the base and the overlay --------------------------------------------------------------------


def test_base_renders_a_topic_a_table_and_an_app_that_uses_them() -> None:
    rendered = by_key(kustomize(BASE))

    assert set(rendered) == {("Topic", "sentences"), ("Table", "word-counts"), ("App", "wordcount")}
    for document in rendered.values():
        assert "namespace" not in document["metadata"]
        kinds.parse(document)  # the models' rules are the apiserver's
    app = rendered["App", "wordcount"]["spec"]
    assert [i["topicRef"]["name"] for i in app["inputs"]] == ["sentences"]
    assert [o["tableRef"]["name"] for o in app["outputs"]] == ["word-counts"]


# What the production overlay changes, object by object; everything else stays as in the base.
PRODUCTION_CHANGES: dict[Key, dict[str, Any]] = {
    ("Topic", "sentences"): {
        "partitions": 12,
        "replicationFactor": 3,
        "config": {"retention.ms": 604_800_000, "min.insync.replicas": 2},
        "deletionPolicy": "Retain",
    },
    ("Table", "word-counts"): {
        "replicationFactor": 3,
        "config": {"min.insync.replicas": 2},
        "deletionPolicy": "Retain",
    },
    ("App", "wordcount"): {
        "image": "registry.example.com/streaming/spark-runtime:0.1.0",
        "scaling": {"minExecutors": 2, "maxExecutors": 6, "executorCores": 2, "lagTarget": 10_000},
        "driver": {"cpu": "1", "memory": "2Gi"},
        "executor": {"memory": "4Gi"},
        "sparkConf": {"spark.sql.shuffle.partitions": "12"},
    },
}


def test_production_overlay_patches_take_effect_and_change_nothing_else() -> None:
    base = by_key(kustomize(BASE))
    overlay = by_key(kustomize(OVERLAY))

    assert set(overlay) == {*base, ("Namespace", "streaming-prod")}
    assert set(PRODUCTION_CHANGES) == set(base)
    for key, changes in PRODUCTION_CHANGES.items():
        document = overlay[key]
        assert document["spec"] == merged(base[key]["spec"], changes), key
        assert document["metadata"]["namespace"] == "streaming-prod"
        assert document["metadata"]["labels"] == {
            **base[key]["metadata"]["labels"],
            "environment": "production",
            "app.kubernetes.io/instance": "wordcount-production",
        }
        kinds.parse(document)
    assert overlay["Namespace", "streaming-prod"]["metadata"]["labels"]["environment"] == (
        "production"
    )
    # One executor core per input partition at most: more would sit idle.
    scaling = overlay["App", "wordcount"]["spec"]["scaling"]
    partitions = overlay["Topic", "sentences"]["spec"]["partitions"]
    assert scaling["maxExecutors"] * scaling["executorCores"] == partitions


def wrapper(tmp_path: Path, on: Path, **kustomization: Any) -> Path:
    """A kustomization of the test's own in tmp_path, built on `on` (by a relative path:
    kustomize refuses absolute ones)."""
    document = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(on, tmp_path)],
        **kustomization,
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    return tmp_path


def test_kustomizeconfig_lets_overlays_rename_references_and_set_the_image(
    tmp_path: Path,
) -> None:
    digest = "sha256:" + "a" * 64
    image = {"name": "registry.example.com/streaming/spark-runtime", "digest": digest}

    renamed = by_key(kustomize(wrapper(tmp_path, OVERLAY, namePrefix="blue-", images=[image])))

    assert set(renamed) == {
        ("Namespace", "streaming-prod"),
        ("Topic", "blue-sentences"),
        ("Table", "blue-word-counts"),
        ("App", "blue-wordcount"),
    }
    app = renamed["App", "blue-wordcount"]["spec"]
    assert app["inputs"][0]["topicRef"]["name"] == "blue-sentences"
    assert app["outputs"][0]["tableRef"]["name"] == "blue-word-counts"
    assert app["image"] == f"registry.example.com/streaming/spark-runtime@{digest}"


def in_test_namespace(
    tmp_path: Path, on: Path, *, namespace: str, kafka_prefix: str, suspend: bool = False
) -> list[dict[str, Any]]:
    """`on` rendered into the test's namespace (kustomize moves every object, and renames the
    overlay's Namespace object to it), each Topic and Table given a Kafka topic under the test's
    prefix, each App suspended if asked."""
    patches = [
        {
            "target": {"kind": kind, "name": name},
            "patch": yaml.safe_dump(
                [{"op": "add", "path": "/spec/topicName", "value": f"{kafka_prefix}.{name}"}]
            ),
        }
        for kind, name in by_key(kustomize(on))
        if kind in ("Topic", "Table")
    ]
    if suspend:
        patches.append(
            {
                "target": {"kind": "App"},
                "patch": yaml.safe_dump([{"op": "add", "path": "/spec/suspend", "value": True}]),
            }
        )
    return kustomize(wrapper(tmp_path, on, namespace=namespace, patches=patches))


def apply(kube: Kube, documents: list[dict[str, Any]]) -> None:
    kube.kubectl(
        "apply",
        "--server-side",
        f"--field-manager={FIELD_MANAGER}",
        "-f",
        "-",
        input=yaml.safe_dump_all(documents),
    )


@pytest.fixture
def unwatched_namespace(new_namespace: Callable[..., str]) -> str:
    """A namespace of the test that no operator watches."""
    return new_namespace(operated=False)


@pytest.mark.usefixtures("crds")
def test_rendered_overlay_applies_and_reads_back(
    kube: Kube, unwatched_namespace: str, kafka_prefix: str, tmp_path: Path
) -> None:
    rendered = in_test_namespace(
        tmp_path, OVERLAY, namespace=unwatched_namespace, kafka_prefix=kafka_prefix
    )
    assert {(d["kind"], d["metadata"]["name"]) for d in rendered} == {
        ("Namespace", unwatched_namespace),
        *(key for key in by_key(kustomize(OVERLAY)) if key[0] != "Namespace"),
    }

    apply(kube, rendered)

    stored = by_key(
        yaml.safe_load(
            kube.kubectl("get", RILLET_KINDS, "-n", unwatched_namespace, "-o", "yaml").stdout
        )["items"]
    )
    applied = {key: d for key, d in by_key(rendered).items() if key[0] != "Namespace"}
    assert set(stored) == set(applied)
    for key, document in applied.items():
        assert contains(stored[key]["spec"], document["spec"]), key
        assert contains(stored[key]["metadata"]["labels"], document["metadata"]["labels"]), key
        kinds.parse(stored[key])  # what the apiserver stores, defaults and all, is readable
    assert stored["Topic", "sentences"]["spec"]["partitions"] == 12
    assert stored["Table", "word-counts"]["spec"]["deletionPolicy"] == "Retain"


@pytest.mark.usefixtures("operator")
def test_base_under_the_operator_is_what_flux_and_argocd_wait_for(
    kube: Kube, namespace: str, kafka_prefix: str, tmp_path: Path
) -> None:
    # The App suspended: its driver would run Spark on the shared node. Its input's partitions
    # still reach the Table, which takes them (it has none of its own).
    apply(
        kube,
        in_test_namespace(
            tmp_path, BASE, namespace=namespace, kafka_prefix=kafka_prefix, suspend=True
        ),
    )

    found = [
        wait_condition(kube, "topic", "sentences", namespace),
        wait_condition(kube, "table", "word-counts", namespace),
        wait_condition(
            kube,
            "app",
            "wordcount",
            namespace,
            condition_type="Reconciling",
            status="False",
            reason="Suspended",
        ),
    ]

    assert found[1]["status"]["partitions"] == found[0]["status"]["partitions"] == 3
    health = gitopshealth.assess(found)
    assert [h.kstatus for h in health] == ["Current"] * 3  # Flux's `wait: true` passes
    assert [h.argocd for h in health] == ["Healthy", "Healthy", "Suspended"]
