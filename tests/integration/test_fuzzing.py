"""Hostile objects, generated from a fixed seed: each is refused at apply or told where it stands.

Test plan (the session operator, one namespace it watches; the manifests come from
hostile.Generator with SEED, so every run applies the same ones):
- 240 generated Topics, Tables and Apps (numbers past int32 and int64, negative counts, wrong
  types, odd and unicode strings, config numbers of 5,000 digits, missing fields, unknown fields
  and config keys), each applied
  on its own with kubectl apply --server-side: each one is either refused by the apiserver, with
  a message naming the field or the object, or, within a deadline, gets a status at its
  generation whose conditions carry a CamelCase reason and a message (Ready, Reconciling or
  Stalled: created, waiting, refused by Kafka or its client, paused, suspended...);
- both outcomes are common (the generator is neither all valid nor all refused);
- valid objects applied among them (Topics, a Table, and the Topic and Table the suspended Apps
  use) become Ready, and the Kafka topics of the valid Topics exist as declared; no App runs a
  driver (no pod in the namespace);
- the operator neither crashes nor wedges (its health endpoint answers now, and the autouse
  operator_stays_healthy check after the test), and never logs `topic batch failed` or a
  handler's exception about the test's objects.
"""

from __future__ import annotations

import collections
import json
import random
import re
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from rillet_devstack.operating import OperatorProcess

from .conftest import Kube
from .hostile import Generator, Manifest
from .kafka_reads import kafka_partitions
from .objects import table, topic, wait_condition
from .polling import wait_for

pytestmark = pytest.mark.usefixtures("operator")

SEED = 20251123
COUNT = 240
# After the last apply: the operator reconciles ~100 objects in a few batches.
DEADLINE = 90.0
REASON = re.compile(r"^[A-Z][A-Za-z0-9]*$")
# How the apiserver refuses an object (or kubectl, one it cannot even send), and the field or
# the name its message must point at.
REFUSED = re.compile(r'The (Topic|Table|App) ".*" is invalid: |Error from server|error: ')
NAMED = re.compile(r"\bspec\b|\.spec\b|\bmetadata\b|resource name")


def _apply(kube: Kube, manifest: Manifest) -> str | None:
    """Apply one manifest as JSON (numbers exactly as generated); the refusal's message, or
    None if the apiserver took it."""
    result = kube.kubectl(
        "apply",
        "--server-side",
        "--field-manager=tests",
        "-f",
        "-",
        input=json.dumps(manifest),
        check=False,
    )
    return result.stderr.strip() if result.returncode != 0 else None


def _standing(obj: dict[str, Any]) -> str | None:
    """The reason an object's status gives at its current generation, None if it gives none."""
    status = obj.get("status") or {}
    if status.get("observedGeneration") != obj["metadata"].get("generation"):
        return None
    conditions = status.get("conditions") or []
    if not conditions:
        return None
    assert all(REASON.fullmatch(c["reason"]) and c["message"] for c in conditions), conditions
    shown = next((c for c in conditions if c["status"] == "True"), conditions[0])
    return f"{shown['type']}={shown['status']} {shown['reason']}"


def _listed(kube: Kube, namespace: str) -> dict[tuple[str, str], dict[str, Any]]:
    listed = [o for kind in ("topic", "table", "app") for o in kube.api.list(kind, namespace)]
    return {(o["kind"], o["metadata"]["name"]): o for o in listed}


def test_generated_objects_are_refused_or_get_a_clear_condition(
    kube: Kube,
    namespace: str,
    kafka_admin: AdminClient,
    kafka_prefix: str,
    operator: OperatorProcess,
    measurement: Callable[[str], None],
) -> None:
    log_start = len(operator.log_text())
    anchor_topic, anchor_table = f"{kafka_prefix}-anchor", f"{kafka_prefix}-anchor-table"
    valid = {
        10: topic(anchor_topic, namespace, partitions=2),
        20: table(anchor_table, namespace, partitions=2),
        **{
            at: topic(f"{kafka_prefix}-valid-{at}", namespace, config={"retention.ms": 60_000})
            for at in (80, 160, 230)
        },
    }
    generator = Generator(random.Random(SEED), namespace=namespace, prefix=kafka_prefix)
    refused: dict[str, str] = {}
    accepted: list[tuple[str, str]] = []
    for index, manifest in enumerate(generator.manifests(COUNT, anchors=valid_names(valid))):
        if index in valid:
            assert _apply(kube, valid[index]) is None
        message = _apply(kube, manifest)
        name = str((manifest.get("metadata") or {}).get("name"))
        if message is None:
            accepted.append((str(manifest["kind"]), name))
        else:
            assert REFUSED.match(message), f"{manifest['kind']} {name}: {message}"
            assert NAMED.search(message), f"{manifest['kind']} {name}: {message}"
            refused[f"{manifest['kind']} {name}"] = message
    assert operator.healthy(), "the operator stopped answering while objects were applied"

    standings: dict[tuple[str, str], str | None] = {}

    def all_standing() -> bool:
        listed = _listed(kube, namespace)
        standings.update({key: _standing(listed[key]) for key in accepted if key in listed})
        return all(standings.get(key) for key in accepted)

    try:
        wait_for(all_standing, timeout=DEADLINE, interval=1.0, what="a condition on each object")
    except AssertionError:
        waiting = {key: standings.get(key) for key in accepted if not standings.get(key)}
        raise AssertionError(f"no condition within {DEADLINE} s: {waiting}") from None

    for manifest in valid.values():
        kind, name = manifest["kind"].lower(), manifest["metadata"]["name"]
        wait_condition(kube, kind, name, namespace, timeout=30)
    assert kafka_partitions(kafka_admin, anchor_topic) == 2
    assert kafka_partitions(kafka_admin, f"{kafka_prefix}-valid-80") == 1
    assert COUNT * 0.2 < len(refused) < COUNT * 0.8, (len(refused), len(accepted))
    pods = kube.kubectl("get", "pods", "-n", namespace, "-o", "name").stdout.split()
    assert pods == [], "an App of the test runs a driver"
    log = operator.log_text()[log_start:]
    assert "topic batch failed" not in log
    assert not [line for line in log.splitlines() if namespace in line and "exception" in line]
    reasons = collections.Counter(str(standing) for standing in standings.values())
    measurement(
        f"fuzzing (seed {SEED}): {COUNT} objects, {len(refused)} refused at apply, "
        f"{len(accepted)} with a condition: {dict(sorted(reasons.items()))}"
    )


def valid_names(valid: dict[int, Manifest]) -> tuple[str, str]:
    """The Topic and the Table suspended Apps read and write (the first two valid objects)."""
    first, second = (valid[at]["metadata"]["name"] for at in sorted(valid)[:2])
    return str(first), str(second)
