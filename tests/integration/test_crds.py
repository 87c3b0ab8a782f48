"""The generated CRDs on a real kube-apiserver.

No operator watches the namespaces of these tests (the session's operator sees only those of
tests that use it), so the statuses asserted here are the test's own writes, and no example
applied here makes a Kafka topic; each example's topics are renamed under the test's Kafka
prefix all the same.

Test plan:
- the CRDs in crds/ install with server-side apply and become Established;
- every example applies with server-side apply, and what the apiserver stores (with its
  defaults filled in) parses with the pydantic models;
- `kubectl explain` prints the models' descriptions, a few fields per kind;
- `kubectl get rillet` lists the three kinds, the short names work, and the printer columns show
  what the status subresource holds;
- every invalid object of invalid_crs.py is refused, with the expected message, both by
  `kubectl create` and by `kubectl apply --server-side`; every invalid update is refused too;
- an App asking for the least driver and executor memory (as strings, bytes, decimal units)
  is accepted by the apiserver and the models.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from rillet.api.v1alpha1 import kinds
from rillet.crdgen import generating

from . import invalid_cases, invalid_crs
from .conftest import Kube
from .namespacefixtures import RILLET_PLURALS
from .polling import wait_for

ROOT = Path(__file__).parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
FIELD_MANAGER = "rillet-tests"


CREATES = [case for case in invalid_crs.CASES if case.before is None]
UPDATES = [case for case in invalid_crs.CASES if case.before is not None]


@pytest.fixture(scope="module")
def crds(kube: Kube) -> list[str]:
    """The CRDs of crds/, installed and Established."""
    names = []
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        kube.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            f"--field-manager={FIELD_MANAGER}",
            "-f",
            str(path),
        )
        names.append(yaml.safe_load(path.read_text(encoding="utf-8"))["metadata"]["name"])
    kube.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{name}" for name in names)
    )
    return names


def _apply(
    kube: Kube, namespace: str, document: dict[str, Any], *, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return kube.kubectl(
        "apply",
        "--server-side",
        f"--field-manager={FIELD_MANAGER}",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(document),
        check=check,
    )


def _refusal(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, f"the apiserver accepted it: {result.stdout}"
    return result.stderr


def test_crds_are_the_generated_ones_and_establish(kube: Kube, crds: list[str]) -> None:
    assert sorted(crds) == ["apps.rillet.io", "tables.rillet.io", "topics.rillet.io"]
    assert sorted(path.name for path in (ROOT / "crds").glob("*.yaml")) == sorted(
        generating.render_all()
    )


def _example(path: Path, kafka_prefix: str) -> str:
    """An example's documents, each Topic and Table given a Kafka topic under the prefix."""
    documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    for document in documents:
        if document["kind"] in ("Topic", "Table"):
            name = document["metadata"]["name"]
            document.setdefault("spec", {})["topicName"] = f"{kafka_prefix}.{name}"
    return yaml.safe_dump_all(documents)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_examples_apply_and_read_back(
    kube: Kube, crds: list[str], namespace: str, kafka_prefix: str, path: Path
) -> None:
    kube.kubectl(
        "apply",
        "--server-side",
        f"--field-manager={FIELD_MANAGER}",
        "-n",
        namespace,
        "-f",
        "-",
        input=_example(path, kafka_prefix),
    )

    # Through the API: `kubectl get rillet` is tested on its own below (a category expands
    # from whatever discovery kubectl holds, so it is asked for once, not in every case).
    stored = [item for plural in RILLET_PLURALS for item in kube.api.list(plural, namespace)]
    documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    assert len(stored) == len(documents)
    for item in stored:
        kinds.parse(item)  # what the apiserver stores, defaults and all, is readable


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("topics.spec.partitions", "Can grow, never shrink"),
        ("topics.spec.topicName", "Defaults to metadata.name"),
        ("topics.spec.config", "Integers may be written bare"),
        ("topics.status.topicId", "Kafka's id of the topic"),
        ("tables.spec.window.step", "Hopping windows only"),
        ("tables.spec.global", "Read the whole Table on every executor"),
        ("apps.spec.scaling.lagTarget", "Records of lag each executor is expected to absorb"),
        ("apps.spec.inputs.schema", "Spark DDL string"),
        ("apps.spec.pipeline.python.entrypoint", "module:function"),
        ("apps.status.executors.ready", "Executors registered with the driver"),
    ],
)
def test_explain_prints_the_models_descriptions(
    kube: Kube, crds: list[str], field: str, text: str
) -> None:
    explained = kube.kubectl("explain", field).stdout
    assert text in " ".join(explained.split())


def test_get_rillet_lists_every_kind_and_short_names_work(
    kube: Kube, crds: list[str], namespace: str, kafka_prefix: str
) -> None:
    kube.kubectl(
        "apply",
        "--server-side",
        f"--field-manager={FIELD_MANAGER}",
        "-n",
        namespace,
        "-f",
        "-",
        input=_example(ROOT / "examples" / "wordcount.yaml", kafka_prefix),
    )

    # Asked again, as a user would, if the first answer has no such category: kubectl expands a
    # category from whatever discovery it holds (errors ignored), and other tests' CRDs come and
    # go meanwhile; once, CI saw "the server doesn't have a resource type" that way.
    listed = wait_for(
        lambda: _names_or_none(kube, "rillet", namespace),
        timeout=30,
        interval=1,
        what="`kubectl get rillet` answering",
    )
    short = kube.kubectl("get", "rt,rtbl,rapp", "-n", namespace, "-o", "name").stdout.split()

    assert (
        sorted(listed)
        == sorted(short)
        == ["app.rillet.io/wordcount", "table.rillet.io/word-counts", "topic.rillet.io/sentences"]
    )


def test_status_subresource_feeds_the_printer_columns(
    kube: Kube, crds: list[str], namespace: str
) -> None:
    _apply(kube, namespace, invalid_cases.topic(name="orders"))
    status = {
        "observedGeneration": 1,
        "topicName": "orders",
        "topicId": "x1",
        "partitions": 3,
        "replicationFactor": 1,
        "config": {"retention.ms": "604800000"},
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "TopicReady",
                "message": "",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            }
        ],
    }
    kube.kubectl(
        "patch",
        "topic",
        "orders",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )

    table = kube.kubectl("get", "topic", "orders", "-n", namespace).stdout.split("\n")
    assert table[0].split() == ["NAME", "KAFKA-NAME", "PARTITIONS", "REPLICAS", "READY", "AGE"]
    assert table[1].split()[:5] == ["orders", "orders", "3", "1", "True"]
    stored = json.loads(
        kube.kubectl("get", "topic", "orders", "-n", namespace, "-o", "json").stdout
    )
    assert kinds.parse(stored).to_wire()["status"] == status


def test_conditions_are_merged_by_type(kube: Kube, crds: list[str], namespace: str) -> None:
    _apply(kube, namespace, invalid_cases.topic(name="orders"))
    condition = {
        "type": "Ready",
        "status": "True",
        "reason": "TopicReady",
        "message": "",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    }
    patch = {"status": {"conditions": [condition, dict(condition, status="False")]}}

    result = kube.kubectl(
        "patch",
        "topic",
        "orders",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(patch),
        check=False,
    )

    assert "Duplicate value" in _refusal(result)


@pytest.mark.parametrize(
    ("driver", "executor"), [("1Gi", "700Mi"), (2**30, 734_003_200), ("1.1G", "0.75G")]
)
def test_the_least_memory_an_app_may_ask_for_is_accepted(
    kube: Kube, crds: list[str], namespace: str, driver: int | str, executor: int | str
) -> None:
    manifest = invalid_cases.app({"driver": {"memory": driver}, "executor": {"memory": executor}})

    _apply(kube, namespace, manifest)

    kinds.parse(manifest)  # the models accept it too


@pytest.mark.parametrize("how", ["create", "server-side-apply"])
@pytest.mark.parametrize("case", CREATES, ids=lambda case: case.id)
def test_invalid_objects_are_refused(
    kube: Kube, crds: list[str], namespace: str, case: invalid_cases.Case, how: str
) -> None:
    manifest = json.dumps(case.manifest)
    if how == "create":
        result = kube.kubectl("create", "-n", namespace, "-f", "-", input=manifest, check=False)
        expect = case.expect
    else:
        result = _apply(kube, namespace, case.manifest, check=False)
        expect = case.expect_ssa or case.expect

    assert expect in _refusal(result)


@pytest.mark.parametrize("case", UPDATES, ids=lambda case: case.id)
def test_invalid_updates_are_refused(
    kube: Kube, crds: list[str], namespace: str, case: invalid_cases.Case
) -> None:
    assert case.before is not None
    _apply(kube, namespace, case.before)

    result = _apply(kube, namespace, case.manifest, check=False)

    assert case.expect in _refusal(result)


def _names_or_none(kube: Kube, resources: str, namespace: str) -> list[str] | None:
    """`kubectl get <resources> -o name`, or None when kubectl knows no such resource type."""
    result = kube.kubectl("get", resources, "-n", namespace, "-o", "name", check=False)
    if "doesn't have a resource type" in result.stderr:
        return None
    assert result.returncode == 0, result.stderr
    return result.stdout.split()
