"""What rolls an App's driver (pure): the spec hash on its pod, and the StatefulSet changes
that need a replacement.

Test plan:
- spec hash: a spec change rolls the driver; scaling, partitions and suspend do not touch the
  pod template at all;
- replacing the StatefulSet is needed only for changes of its immutable fields.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rillet.reconcile.appobjects import (
    building,
    contexts,
    drivers,
    sparkconfs,
)
from tests.unit import wordcount_inputs

ENV = wordcount_inputs.ENV
_objects = wordcount_inputs.objects
_context = wordcount_inputs.context
_inputs = wordcount_inputs.inputs
_pod = wordcount_inputs.driver_pod


def _template_hash(objects: building.AppObjects) -> str:
    annotation: str = _pod(objects)["metadata"]["annotations"]["rillet.io/spec-hash"]
    return annotation


def test_spec_hash_is_on_the_driver_pod_and_stable() -> None:
    first, second = _objects(), _objects()

    assert _template_hash(first) == first.spec_hash == second.spec_hash
    assert len(first.spec_hash) == 64


@pytest.mark.parametrize(
    "change",
    [
        {"image": "rillet/spark-runtime:0.2.0"},
        {"sparkConf": {"spark.sql.adaptive.enabled": "false"}},
        {"sparkConf": {"spark.sql.shuffle.partitions": "6"}},
        {"pipeline": {"sql": "SELECT value AS word, 1 AS count FROM sentences"}},
        {"executor": {"memory": "4Gi"}},
        {"executor": {"cpu": "2"}},
        {"driver": {"memory": "2Gi"}},
        {"scaling": {"executorCores": 2}},
        {"checkpoint": {"location": "s3a://bucket/wc"}},
        {"checkpoint": {"onLoss": "Recompute"}},
    ],
)
def test_a_spec_change_changes_the_hash(change: dict[str, Any]) -> None:
    assert _objects(**change).spec_hash != _objects().spec_hash


@pytest.mark.parametrize(
    ("key", "default", "own_value"),
    [("spark.locality.wait", "0s", "3s"), ("spark.sql.streaming.pollingDelay", "250ms", "10ms")],
)
def test_restart_free_defaults_are_not_hashed_but_an_apps_own_value_is(
    key: str, default: str, own_value: str
) -> None:
    # A release adding such a default restarts no driver; an App's own value does.
    conf = sparkconfs.build_spark_conf(_context())
    assert conf[key] == default
    assert key not in sparkconfs.hashed(conf)
    own = _objects(sparkConf={key: own_value})
    assert own.spec_hash != _objects().spec_hash


def test_run_spec_fields_at_their_defaults_are_not_hashed() -> None:
    """So an operator upgrade that adds a field (as checkpoint.onLoss and eventTime were
    added) restarts no driver whose App leaves it unset."""
    hashed = drivers.hashed_run_spec(_context().run_spec)

    assert "checkpoint_on_loss" not in hashed
    assert not {"event_time", "max_offsets_per_trigger"} & set(hashed["inputs"][0])
    assert _objects(checkpoint={"onLoss": "Stall"}).spec_hash == _objects().spec_hash


@pytest.mark.parametrize(
    "change",
    [
        {"scaling": {"minExecutors": 2, "maxExecutors": 6}},
        {"scaling": {"lagTarget": 10, "stabilizationWindowSeconds": 5}},
        {"suspend": True},
    ],
)
def test_scaling_changes_leave_the_pod_template_alone(change: dict[str, Any]) -> None:
    before, after = _objects(), _objects(**change)

    assert after.stateful_set["spec"]["template"] == before.stateful_set["spec"]["template"]


def test_more_partitions_leave_the_pod_template_alone() -> None:
    app, run_spec = _inputs()
    grown = run_spec.model_copy(
        update={
            "inputs": tuple(i.model_copy(update={"partitions": 12}) for i in run_spec.inputs),
            "shuffle_partitions": 12,
        }
    )

    before = building.build_app_objects(app, run_spec, ENV)
    after = building.build_app_objects(app, grown, ENV)

    assert after.stateful_set == before.stateful_set
    assert after.config_map != before.config_map


def _as_stored(stateful_set: dict[str, Any]) -> dict[str, Any]:
    """The StatefulSet as the apiserver returns it: defaults filled in."""
    stored = copy.deepcopy(stateful_set)
    for claim in stored["spec"].get("volumeClaimTemplates", ()):
        claim |= {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "status": {"phase": "Pending"},
        }
        claim["spec"]["volumeMode"] = "Filesystem"
    stored["spec"]["revisionHistoryLimit"] = 10
    return stored


def test_an_unchanged_stateful_set_needs_no_replacement() -> None:
    desired = _objects().stateful_set

    assert drivers.replacement_reasons(_as_stored(desired), desired) == []
    assert (
        drivers.replacement_reasons(_as_stored(desired), _objects(suspend=True).stateful_set) == []
    )


def test_a_new_claim_size_or_a_remote_checkpoint_needs_a_replacement() -> None:
    stored = _as_stored(_objects().stateful_set)
    bigger = contexts.AppEnvironment(kafka_bootstrap="kafka:9092", checkpoint_size="5Gi")

    assert drivers.replacement_reasons(stored, _objects(bigger).stateful_set) == [
        "volumeClaimTemplates"
    ]
    remote = _objects(checkpoint={"location": "s3a://b/wc"}).stateful_set
    assert drivers.replacement_reasons(stored, remote) == ["volumeClaimTemplates"]
