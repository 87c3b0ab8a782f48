"""The pydantic models of Topic, Table and App: wire format, defaults and descriptions.

Test plan:
- camelCase on the wire, snake_case in Python; parsing what we serialise gives the same object;
- unknown fields and coerced types are refused (as the apiserver refuses them);
- defaults match what the CRD makes the apiserver fill in;
- every field of every model has a description (what `kubectl explain` prints);
- every example in examples/ parses;
- kinds.parse refuses other kinds and API versions.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pydantic
import pytest
import yaml

from rillet.api.v1alpha1 import (
    appflows,
    appoutputs,
    appresources,
    apps,
    conditions,
    kinds,
    objects,
    tables,
    topics,
)

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.yaml"))


def _documents() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{path.name}:{document['kind']}/{document['metadata']['name']}", document)
        for path in EXAMPLES
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8"))
    ]


def _models(model: type[pydantic.BaseModel], seen: set[type[pydantic.BaseModel]]) -> None:
    """Every model reachable from `model` through its fields, into `seen`."""
    if model in seen:
        return
    seen.add(model)
    for field in model.model_fields.values():
        for candidate in _types_in(field.annotation):
            _models(candidate, seen)


def _types_in(annotation: Any) -> list[type[pydantic.BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return [annotation]
    return [found for arg in getattr(annotation, "__args__", ()) for found in _types_in(arg)]


def test_examples_exist() -> None:
    assert {path.name for path in EXAMPLES} >= {
        "wordcount.yaml",
        "windowed-clicks.yaml",
        "enrich-orders.yaml",
    }


@pytest.mark.parametrize("item", _documents(), ids=lambda item: item[0])
def test_examples_parse_and_round_trip(item: tuple[str, dict[str, Any]]) -> None:
    name, document = item
    resource = kinds.parse(document)
    wire = resource.to_wire()

    assert kinds.parse(wire) == resource
    assert _contains(wire, document), f"{name}: serialising lost or changed fields"


def _contains(big: Any, small: Any) -> bool:
    """Whether `big` has everything `small` has (extra keys in `big` are defaults)."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(
            k in big and _contains(big[k], v) for k, v in small.items()
        )
    if isinstance(small, list):
        return (
            isinstance(big, list)
            and len(big) == len(small)
            and all(_contains(b, s) for b, s in zip(big, small, strict=True))
        )
    return bool(big == small)


def test_wire_names_are_camel_case_and_python_names_snake_case() -> None:
    spec = appresources.Scaling(min_executors=2, max_executors=4)
    assert spec.to_wire()["minExecutors"] == 2
    assert appresources.Scaling.model_validate({"minExecutors": 2}).min_executors == 2
    assert appresources.Scaling.model_validate({"min_executors": 2}).min_executors == 2


def test_python_keywords_keep_their_wire_names() -> None:
    output = appoutputs.Output.model_validate({"topicRef": {"name": "out"}, "from": "totals"})
    table = tables.TableSpec.model_validate({"global": True})
    inp = appflows.Input.model_validate({"name": "a", "topicRef": {"name": "a"}, "schema": "x INT"})

    assert (output.from_, table.global_, inp.schema_) == ("totals", True, "x INT")
    assert output.to_wire()["from"] == "totals"
    assert table.to_wire()["global"] is True
    assert inp.to_wire()["schema"] == "x INT"


@pytest.mark.parametrize(
    "document",
    [
        {"partitions": 3, "replicas": 3},
        {"partitions": "3"},
        {"partitions": 3.0},
        {"partitions": True},
        {"partitions": 3, "deletionPolicy": "retain"},
    ],
)
def test_topic_specs_are_neither_guessed_nor_coerced(document: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        topics.TopicSpec.model_validate(document)


def test_defaults_are_those_the_apiserver_fills_in() -> None:
    topic = topics.TopicSpec.model_validate({"partitions": 1})
    table = tables.TableSpec.model_validate({})
    app = kinds.parse(
        {
            "apiVersion": objects.API_VERSION,
            "kind": "App",
            "metadata": {"name": "a"},
            "spec": {
                "image": "i",
                "inputs": [{"name": "t", "topicRef": {"name": "t"}, "format": "bytes"}],
                "pipeline": {"sql": "SELECT * FROM t"},
                "outputs": [{"topicRef": {"name": "u"}}],
            },
        }
    )
    assert isinstance(app, apps.App)

    assert topic.deletion_policy == "Retain"
    assert (table.key_format, table.value_format, table.global_) == ("string", "json", False)
    assert app.spec.scaling == appresources.Scaling(
        min_executors=1,
        max_executors=8,
        executor_cores=1,
        lag_target=1000,
        stabilization_window_seconds=60,
    )
    assert (app.spec.driver.cpu, app.spec.driver.memory, app.spec.executor.memory) == (
        "1",
        "1Gi",
        "2Gi",
    )
    assert app.spec.inputs[0].starting_offsets == "latest"
    assert app.spec.suspend is False


def test_status_round_trips_with_conditions() -> None:
    status = topics.TopicStatus.model_validate(
        {
            "observedGeneration": 3,
            "topicName": "orders",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "TopicReady",
                    "message": "",
                    "lastTransitionTime": "2025-01-02T03:04:05Z",
                }
            ],
        }
    )

    ready = status.condition(conditions.READY)
    assert ready is not None
    assert ready.last_transition_time == datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert status.to_wire()["conditions"][0]["lastTransitionTime"] == "2025-01-02T03:04:05Z"
    assert status.condition(conditions.STALLED) is None


@pytest.mark.parametrize("reason", ["", "lower case", "Ends_with,", "1Starts"])
def test_condition_reasons_are_camel_case_words(reason: str) -> None:
    with pytest.raises(pydantic.ValidationError):
        conditions.Condition(
            type="Ready",
            status="True",
            reason=reason,
            message="",
            last_transition_time=datetime.now(UTC),
        )


@pytest.mark.parametrize("model", kinds.ALL, ids=lambda m: m.__name__)
def test_every_field_has_a_description(model: type[objects.Resource]) -> None:
    seen: set[type[pydantic.BaseModel]] = set()
    _models(model, seen)
    missing = [
        f"{m.__name__}.{name}"
        for m in seen
        if m is not objects.ObjectMeta
        for name, field in m.model_fields.items()
        if not field.description
    ]
    assert not missing
    assert all(m.__doc__ for m in seen)


@pytest.mark.parametrize(
    "document",
    [
        {"apiVersion": "rillet.io/v1", "kind": "Topic"},
        {"apiVersion": objects.API_VERSION, "kind": "KafkaTopic"},
        {"apiVersion": objects.API_VERSION},
    ],
)
def test_parse_refuses_other_kinds_and_versions(document: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"not a rillet\.io/v1alpha1 object"):
        kinds.parse(document)


def test_kind_is_fixed_per_model() -> None:
    with pytest.raises(pydantic.ValidationError):
        topics.Topic.model_validate({"kind": "Table", "spec": {"partitions": 1}})
