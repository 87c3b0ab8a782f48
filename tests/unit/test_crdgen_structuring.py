"""Structural schemas: what the generator makes of pydantic's JSON schema, and the CRDs' shape.

Test plan:
- the rewrites, on small models: $ref inlined (the field's description wins, rules add up),
  Optional collapsed, const to enum, titles and additionalProperties: false dropped, defaults
  kept, int-or-string kept, a real union refused;
- every generated CRD schema is structural, described and bounded (every integer has a minimum
  and a maximum) throughout, with no $ref left; a node missing any of it is reported;
- the CRDs carry what the issue asks: group, scope, status subresource, category, short names
  that collide with no common CRD, printer columns, conditions as a list map keyed by type, an
  inputs list keyed by name, CEL rules with messages.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Literal

import pytest
from pydantic import Field

from rillet.api.v1alpha1 import kinds, objects, rules
from rillet.crdgen import building, structuring

_POSITIVE = rules.Rule(rule="self > 0", message="n must be positive", check=lambda n: n > 0)


class _Inner(objects.WireModel):
    """Inner model."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.Rule(rule="self.n < 10", message="n must be below 10", check=lambda m: m.n < 10),
    )

    n: int = Field(default=1, description="A number.")


class _Outer(objects.WireModel):
    """Outer model."""

    inner: _Inner | None = Field(default=None, description="The inner part.")
    fixed: Literal["only"] = Field(default="only", description="A constant.")
    counts: dict[str, int] = Field(default_factory=dict, description="Counts.")


def _schema(model: type[objects.WireModel]) -> dict[str, Any]:
    return structuring.structural(model.model_json_schema(by_alias=True))


def test_refs_are_inlined_with_the_fields_description() -> None:
    inner = _schema(_Outer)["properties"]["inner"]

    assert inner["description"] == "The inner part."
    assert inner["type"] == "object"
    assert inner["properties"]["n"] == {"description": "A number.", "type": "integer", "default": 1}
    assert inner["x-kubernetes-validations"] == [
        {"rule": "self.n < 10", "message": "n must be below 10"}
    ]


def test_optional_const_titles_and_closed_objects_are_rewritten() -> None:
    schema = _schema(_Outer)
    text = json.dumps(schema)

    for absent in ("anyOf", "$ref", "title", "null", '"additionalProperties": false'):
        assert absent not in text
    assert schema["properties"]["fixed"]["enum"] == ["only"]
    assert schema["properties"]["counts"]["additionalProperties"] == {"type": "integer"}


class _Ruled(objects.WireModel):
    """A model whose fields carry rules of their own."""

    inner: Annotated[
        _Inner, rules.Rule(rule="self.n != 5", message="n must not be 5", check=lambda m: m.n != 5)
    ] = Field(description="Inner.")
    n: Annotated[int, _POSITIVE] = Field(description="N.")


def test_field_and_model_rules_add_up() -> None:
    schema = _schema(_Ruled)

    assert [r["rule"] for r in schema["properties"]["inner"]["x-kubernetes-validations"]] == [
        "self.n < 10",
        "self.n != 5",
    ]
    assert schema["properties"]["n"]["x-kubernetes-validations"] == [
        {"rule": "self > 0", "message": "n must be positive"}
    ]


def test_rules_run_in_pydantic_with_their_messages() -> None:
    with pytest.raises(ValueError, match="n must not be 5"):
        _Ruled.model_validate({"inner": {"n": 5}, "n": 1})
    with pytest.raises(ValueError, match="n must be below 10"):
        _Ruled.model_validate({"inner": {"n": 11}, "n": 1})
    with pytest.raises(ValueError, match="n must be positive"):
        _Ruled.model_validate({"inner": {}, "n": 0})


def test_a_union_of_types_is_refused() -> None:
    class Mixed(objects.WireModel):
        """Mixed."""

        value: int | str = Field(description="Either.")

    with pytest.raises(structuring.SchemaError, match="anyOf of several types"):
        _schema(Mixed)


@pytest.mark.parametrize("model", kinds.ALL, ids=lambda m: m.__name__)
def test_generated_schemas_are_structural_and_described(model: type[objects.Resource]) -> None:
    schema = building.build_schema(model)

    assert structuring.violations(schema, skip=frozenset({".metadata"})) == []
    assert "$ref" not in json.dumps(schema)
    assert list(schema["properties"]) == ["apiVersion", "kind", "metadata", "spec", "status"]


def test_violations_are_reported() -> None:
    bad = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"description": "B.", "anyOf": [{"type": "string"}, {"type": "integer"}]},
            "c": {
                "description": "C.",
                "type": "object",
                "x-kubernetes-validations": [{"rule": "x"}],
            },
            "d": {"description": "D.", "type": "integer", "minimum": 0},
            "e": {
                "description": "E.",
                "x-kubernetes-int-or-string": True,
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "maximum": 9,
            },
        },
    }
    assert structuring.violations(bad) == [
        ".a: no description",
        ".b: no type",
        ".b: anyOf outside an int-or-string node",
        ".c: a rule without a message: x",
        ".d: an integer without a maximum",
        ".e: an integer without a minimum",
    ]


@pytest.mark.parametrize("model", kinds.ALL, ids=lambda m: m.__name__)
def test_crds_are_namespaced_with_status_and_category(model: type[objects.Resource]) -> None:
    crd = building.build_crd(model)
    version = crd["spec"]["versions"][0]

    assert crd["metadata"]["name"] == f"{model.kind_info.plural}.rillet.io"
    assert crd["spec"]["group"] == "rillet.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["categories"] == ["rillet"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {column["name"]: column["jsonPath"] for column in version["additionalPrinterColumns"]}
    assert columns["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Age"] == ".metadata.creationTimestamp"


def test_short_names_do_not_collide_with_common_crds() -> None:
    taken = {
        "app",
        "apps",
        "application",
        "applications",
        "kt",
        "kafkatopic",
        "topic",
        "table",
        "tables",
        "topics",
        "po",
        "svc",
        "deploy",
        "sts",
        "cm",
        "ns",
        "pv",
        "pvc",
        "rs",
    }
    short_names = [name for model in kinds.ALL for name in model.kind_info.short_names]

    assert sorted(short_names) == ["rapp", "rt", "rtbl"]
    assert not taken & set(short_names)


def test_printer_columns_show_kafka_state() -> None:
    def columns(model: type[objects.Resource]) -> dict[str, str]:
        return {c.name: c.json_path for c in model.kind_info.printer_columns}

    topic, table, app = (columns(model) for model in kinds.ALL)
    assert topic["Kafka-Name"] == ".status.topicName"
    assert topic["Partitions"] == ".status.partitions"
    assert topic["Replicas"] == ".status.replicationFactor"
    assert table["Window"] == ".spec.window.type"
    assert app["Executors"] == ".status.executors.ready"
    assert app["Desired"] == ".status.executors.desired"
    assert app["Lag"] == ".status.lag"


@pytest.mark.parametrize("model", kinds.ALL, ids=lambda m: m.__name__)
def test_conditions_are_a_list_map_keyed_by_type(model: type[objects.Resource]) -> None:
    conditions = building.build_schema(model)["properties"]["status"]["properties"]["conditions"]

    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert conditions["items"]["required"] == [
        "type",
        "status",
        "reason",
        "message",
        "lastTransitionTime",
    ]


def test_app_inputs_are_keyed_by_name_and_defaults_fill_nested_objects() -> None:
    spec = building.build_schema(kinds.BY_KIND["App"])["properties"]["spec"]

    assert spec["properties"]["inputs"]["x-kubernetes-list-map-keys"] == ["name"]
    assert spec["properties"]["inputs"]["items"]["required"] == ["name"]
    for name in ("scaling", "driver", "executor"):
        assert spec["properties"][name]["default"] == {}
    assert spec["required"] == ["image", "inputs", "pipeline", "outputs"]


def test_config_values_are_int_or_string_and_bounded() -> None:
    config = building.build_schema(kinds.BY_KIND["Topic"])["properties"]["spec"]["properties"][
        "config"
    ]

    assert config["maxProperties"] == 33
    assert config["additionalProperties"]["x-kubernetes-int-or-string"] is True
    assert config["additionalProperties"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]


def test_every_rule_names_what_to_fix() -> None:
    for model in kinds.ALL:
        for path, node in structuring.walk(building.build_schema(model)):
            for rule in node.get("x-kubernetes-validations", ()):
                assert ":" in rule["message"] or "must" in rule["message"], (path, rule)
