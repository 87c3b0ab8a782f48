"""The base of every Rillet API object: wire conventions, kind metadata and the resource envelope.

Conventions shared by all models of the API:
- camelCase on the wire, snake_case in Python (both accepted when parsing);
- unknown fields are errors, never silently dropped;
- no type coercion (`partitions: "3"` is an error, as it is for the apiserver);
- every field has a description, which is what `kubectl explain` prints;
- validation rules (`rules.Rule`) sit next to the fields and run in pydantic as well as in CEL.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, ClassVar, Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from rillet.api.v1alpha1 import rules

GROUP = "rillet.io"
VERSION = "v1alpha1"
API_VERSION: Final = "rillet.io/v1alpha1"
CATEGORY = "rillet"


def _add_model_rules(schema: dict[str, Any], model: type[Any]) -> None:
    """Put a model's own `cel_rules` into its JSON schema (pydantic's json_schema_extra hook)."""
    model_rules: tuple[rules.Rule, ...] = getattr(model, "cel_rules", ())
    if model_rules:
        schema[rules.SCHEMA_KEY] = [rule.to_schema() for rule in model_rules]


class WireModel(BaseModel):
    """A part of an API object, as it travels between kubectl, the apiserver and the operator."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        strict=True,
        json_schema_extra=_add_model_rules,
    )

    # Rules about the model as a whole (cross-field rules); see rules.Rule.
    cel_rules: ClassVar[tuple[rules.Rule, ...]] = ()

    @model_validator(mode="after")
    def _check_cel_rules(self) -> Self:
        messages = [m for rule in type(self).cel_rules if (m := rule.violation(self)) is not None]
        if messages:
            raise ValueError("; ".join(messages))
        return self

    def to_wire(self) -> dict[str, Any]:
        """The object as JSON-ready camelCase data, without unset optional fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ObjectMeta(BaseModel):
    """The standard Kubernetes object metadata: the few fields Rillet reads, the rest kept as is."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    name: str | None = Field(default=None, description="Name of the object in its namespace.")
    generate_name: str | None = Field(default=None, description="Prefix for a generated name.")
    namespace: str | None = Field(default=None, description="Namespace of the object.")
    uid: str | None = Field(default=None, description="Unique id set by the apiserver.")
    resource_version: str | None = Field(default=None, description="Version for concurrency.")
    generation: int | None = Field(default=None, description="Sequence number of spec changes.")
    creation_timestamp: datetime | None = Field(default=None, description="Creation time.")
    deletion_timestamp: datetime | None = Field(default=None, description="Deletion request time.")
    labels: dict[str, str] | None = Field(default=None, description="Labels of the object.")
    annotations: dict[str, str] | None = Field(default=None, description="Annotations.")
    finalizers: list[str] | None = Field(default=None, description="Finalizers of the object.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrinterColumn:
    """A column of `kubectl get` (a CRD additionalPrinterColumn)."""

    name: str
    type: Literal["string", "integer", "number", "boolean", "date"]
    json_path: str
    description: str
    priority: int = 0


READY_COLUMN = PrinterColumn(
    name="Ready",
    type="string",
    json_path='.status.conditions[?(@.type=="Ready")].status',
    description="Whether the object is in the state its spec asks for.",
)
AGE_COLUMN = PrinterColumn(
    name="Age",
    type="date",
    json_path=".metadata.creationTimestamp",
    description="Time since the object was created.",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class KindInfo:
    """How a kind is named and listed by Kubernetes (the CRD's names and printer columns)."""

    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    printer_columns: tuple[PrinterColumn, ...]
    categories: tuple[str, ...] = (CATEGORY,)


class Resource(WireModel):
    """A whole Rillet object: apiVersion, kind, metadata, spec and status.

    Concrete kinds add `kind` (a Literal of their name), `spec` and `status`.
    """

    # Set by every concrete kind.
    kind_info: ClassVar[KindInfo]

    api_version: Literal["rillet.io/v1alpha1"] = Field(
        default=API_VERSION,
        description="The versioned schema of this representation of an object.",
    )
    metadata: ObjectMeta = Field(
        default_factory=ObjectMeta,
        description="Standard object metadata.",
    )
