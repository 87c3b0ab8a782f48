"""Every integer of the API is bounded, int32 where Kafka counts in int32 (pure).

A Topic with `partitions: 2147483648` used to pass the CRD and crash the operator's topic batch
(`OverflowError: signed integer is greater than maximum` building the Kafka client's request).

Test plan:
- every integer node of the three CRDs as checked in (crds/) has a minimum and a maximum, within
  int64 (a walk over every schema, int-or-string nodes included), each one a float64 that turns
  back into the same int64 (the apiserver compares integers with int64(bound): a maximum of
  2**63 - 1 reads as -2**63, and the apiserver refused every value, and the CRDs' defaults);
- the fields Kafka holds as int32 (partition counts, in spec and status) stop at 2147483647, the
  replication factor at Kafka's int16;
- the integer topic configs are Kafka 4.1's INT and LONG settings: a bare value of an INT setting
  stops at int32 (a rule, in CEL and in pydantic with one message), any bare value at int64;
- the models refuse one past each bound, and accept the bound itself; Long.MAX_VALUE, past the
  int64 bound a CRD can hold, is accepted quoted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydantic
import pytest
import yaml

from rillet.api.v1alpha1 import fields, kinds, topicconfigs, topics
from rillet.crdgen import generating, structuring
from tests.integration import invalid_cases

REPO = Path(__file__).resolve().parents[2]
INT32_MAX = 2**31 - 1
INT64_MAX = fields.INT64_SCHEMA_MAX


def _checked_in_schemas() -> dict[str, dict[str, Any]]:
    schemas = {}
    for path in sorted((REPO / generating.CRD_DIRECTORIES[0]).glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        schemas[crd["spec"]["names"]["kind"]] = crd["spec"]["versions"][0]["schema"][
            "openAPIV3Schema"
        ]
    return schemas


SCHEMAS = _checked_in_schemas()


def _integers(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        path: node
        for path, node in structuring.walk(schema)
        if node.get("type") == "integer" or node.get("x-kubernetes-int-or-string")
    }


def test_the_crds_are_all_there() -> None:
    assert sorted(SCHEMAS) == ["App", "Table", "Topic"]


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_every_integer_has_a_minimum_and_a_maximum(kind: str) -> None:
    integers = _integers(SCHEMAS[kind])

    assert integers, "the walk found no integer"
    unbounded = [p for p, node in integers.items() if not {"minimum", "maximum"} <= node.keys()]
    assert unbounded == []
    for path, node in integers.items():
        assert -(2**63) <= node["minimum"] <= node["maximum"] <= INT64_MAX, path
        for bound in (node["minimum"], node["maximum"]):
            assert int(float(bound)) == bound, (path, bound)


@pytest.mark.parametrize("kind", ["Topic", "Table"])
def test_kafka_int32_and_int16_fields_stop_at_their_width(kind: str) -> None:
    integers = _integers(SCHEMAS[kind])

    assert integers[".spec.partitions"]["maximum"] == INT32_MAX
    assert integers[".status.partitions"]["maximum"] == INT32_MAX
    assert integers[".spec.replicationFactor"]["maximum"] == topics.MAX_REPLICATION_FACTOR
    assert topics.MAX_REPLICATION_FACTOR == 2**15 - 1
    assert integers[".spec.config[*]"]["maximum"] == INT64_MAX
    assert integers[".spec.config[*]"]["minimum"] == -(2**63)


def test_the_status_counts_of_an_app_fit_kafka_and_kubernetes() -> None:
    integers = _integers(SCHEMAS["App"])

    assert integers[".status.inputs[*].partitions"]["maximum"] == INT32_MAX
    for path in (".status.lag", ".status.inputs[*].lag", ".status.observedGeneration"):
        assert integers[path]["maximum"] == INT64_MAX, path


def test_integer_configs_are_kafkas_int_and_long_settings() -> None:
    # Kafka 4.1's LogConfig: ConfigDef.Type.INT for these, LONG for every other integer.
    assert set(topicconfigs.names_of_width(32)) == {
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "index.interval.bytes",
        "max.message.bytes",
        "min.insync.replicas",
        "segment.bytes",
        "segment.index.bytes",
    }
    assert {"retention.ms", "retention.bytes", "segment.ms", "max.compaction.lag.ms"} <= set(
        topicconfigs.names_of_width(64)
    )


@pytest.mark.parametrize(
    ("name", "value", "fits"),
    [
        ("max.message.bytes", INT32_MAX, True),
        ("max.message.bytes", INT32_MAX + 1, False),
        ("max.message.bytes", -(2**31), True),
        ("max.message.bytes", -(2**31) - 1, False),
        ("max.message.bytes", str(INT32_MAX + 1), True),  # a string: Kafka's to refuse
        ("retention.ms", INT32_MAX + 1, True),
        ("retention.ms", INT64_MAX, True),
        ("preallocate", "true", True),
    ],
)
def test_bare_integers_fit_their_kafka_width(name: str, value: int | str, fits: bool) -> None:
    assert topicconfigs.in_range(topicconfigs.BY_NAME[name], value) is fits


def test_long_max_value_is_accepted_quoted() -> None:
    kinds.parse(invalid_cases.topic({"config": {"max.compaction.lag.ms": str(2**63 - 1)}}))
    assert fields.INT64_SCHEMA_MAX == 2**63 - 1024 == int(float(2**63 - 1024))


def test_an_int32_setting_past_its_width_is_refused_with_the_rules_message() -> None:
    manifest = invalid_cases.topic({"config": {"segment.bytes": INT32_MAX + 1}})

    with pytest.raises(pydantic.ValidationError) as refused:
        kinds.parse(manifest)
    assert "config segment.bytes is a 32-bit integer in Kafka (INT)" in str(refused.value)


TOPIC = invalid_cases.topic
TABLE = invalid_cases.table
APP = invalid_cases.app


@pytest.mark.parametrize(
    ("make", "spec", "bound"),
    [
        (TOPIC, lambda n: {"partitions": n}, INT32_MAX),
        (TABLE, lambda n: {"partitions": n}, INT32_MAX),
        (TOPIC, lambda n: {"replicationFactor": n}, 2**15 - 1),
        (TOPIC, lambda n: {"config": {"retention.ms": n}}, INT64_MAX),
        (TABLE, lambda n: {"config": {"max.message.bytes": n}}, INT32_MAX),
        (APP, lambda n: {"scaling": {"lagTarget": n}}, INT64_MAX),
        (APP, lambda n: {"driver": {"cpu": n}}, fields.MAX_CPU_INTEGER),
        (APP, lambda n: {"executor": {"memory": n}}, fields.MAX_MEMORY_INTEGER),
    ],
    ids=[
        "topic-partitions",
        "table-partitions",
        "replication-factor",
        "retention-ms",
        "max-message-bytes",
        "lag-target",
        "cpu",
        "memory",
    ],
)
def test_models_accept_the_bound_and_refuse_one_past_it(
    make: Callable[[dict[str, Any]], dict[str, Any]],
    spec: Callable[[int], dict[str, Any]],
    bound: int,
) -> None:
    kinds.parse(make(spec(bound)))

    with pytest.raises(pydantic.ValidationError) as refused:
        kinds.parse(make(spec(bound + 1)))
    assert str(bound) in str(refused.value)


@pytest.mark.parametrize(
    "status",
    [
        {"observedGeneration": INT64_MAX + 1},
        {"partitions": INT32_MAX + 1},
        {"conditions": [], "replicationFactor": 2**15},
    ],
)
def test_status_counts_past_their_width_are_refused(status: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        kinds.parse({**invalid_cases.topic(), "status": status})
