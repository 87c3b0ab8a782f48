"""Validation rules written once, enforced twice: by the kube-apiserver (CEL) and by pydantic.

A `Rule` carries a CEL expression for the CRD's `x-kubernetes-validations` next to a Python
predicate that says the same thing, with one message for both. Attach a rule to a field with
`Annotated[T, Rule(...)]`, or to a whole model with its `cel_rules` class attribute (see
`objects.WireModel`). The CRD generator reads the rules out of the JSON schema; pydantic runs the
predicates, so `rillet run app.yaml` fails locally with the message `kubectl apply` would print.

Transition rules (those reading `oldSelf`) only make sense on update, so they have no predicate:
the apiserver alone enforces them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.alias_generators import to_snake
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

# The machine-readable reasons the apiserver accepts on a rule (FieldValueInvalid is its default).
Reason = Literal[
    "FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"
]

# Where rules live in the JSON schema pydantic produces, and in the CRD.
SCHEMA_KEY = "x-kubernetes-validations"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Rule:
    """One CEL rule of a CRD schema node, and its Python mirror.

    `check` receives what CEL calls `self`: the validated field value, or the model instance for
    model-level rules. It returns True when the value is valid. `explain`, when given, mirrors
    `message_expression` and builds the message from the offending value.
    """

    rule: str
    message: str
    message_expression: str | None = None
    field_path: str | None = None
    reason: Reason | None = None
    check: Callable[[Any], bool] | None = None
    explain: Callable[[Any], str] | None = None

    def __post_init__(self) -> None:
        if self.check is None and not self.is_transition:
            raise ValueError(f"rule {self.rule!r} needs a Python check (only oldSelf rules don't)")

    @property
    def is_transition(self) -> bool:
        """Whether the rule compares with the stored object (checked on update only)."""
        return "oldSelf" in self.rule

    def violation(self, value: Any) -> str | None:
        """The message for `value` if it breaks this rule, else None."""
        if self.check is None or self.check(value):
            return None
        return self.explain(value) if self.explain is not None else self.message

    def to_schema(self) -> dict[str, Any]:
        """The rule as one item of `x-kubernetes-validations`."""
        item: dict[str, Any] = {"rule": self.rule, "message": self.message}
        if self.message_expression is not None:
            item["messageExpression"] = self.message_expression
        if self.field_path is not None:
            item["fieldPath"] = self.field_path
        if self.reason is not None:
            item["reason"] = self.reason
        return item

    # pydantic hooks, used when the rule is `Annotated` metadata of a field type.

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return RuleSet((self,)).__get_pydantic_core_schema__(source, handler)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return RuleSet((self,)).__get_pydantic_json_schema__(schema, handler)


@dataclasses.dataclass(frozen=True)
class RuleSet:
    """Several rules as one piece of `Annotated` metadata (applied in order)."""

    rules: tuple[Rule, ...]

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        schema = handler(source)
        if not any(rule.check is not None for rule in self.rules):
            return schema
        return core_schema.no_info_after_validator_function(self._validate, schema)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = dict(handler(schema))
        json_schema[SCHEMA_KEY] = [
            *json_schema.get(SCHEMA_KEY, []),
            *(rule.to_schema() for rule in self.rules),
        ]
        return json_schema

    def _validate(self, value: Any) -> Any:
        messages = [m for rule in self.rules if (m := rule.violation(value)) is not None]
        if messages:
            raise ValueError("; ".join(messages))
        return value


def exactly_one(*fields: str, message: str, reason: Reason | None = None) -> Rule:
    """A model-level rule: exactly one of the optional wire `fields` is set."""
    attributes = [to_snake(field) for field in fields]
    flags = ", ".join(f"has(self.{field})" for field in fields)

    def check(model: Any) -> bool:
        return sum(getattr(model, name) is not None for name in attributes) == 1

    return Rule(
        rule=f"[{flags}].filter(x, x).size() == 1", message=message, reason=reason, check=check
    )


def every_key(
    *,
    passes: str,
    fails: str,
    failing: Callable[[Any], list[str]],
    message: str,
    lead: str,
    tail: str,
) -> Rule:
    """A rule on a map: every key `k` passes the CEL condition `passes`, whose negation `fails`
    is (both as written, so the CRDs keep their text). The message names the first failing key
    only, as `<lead><key><tail>`: the apiserver's cost estimate for join() is far over its budget
    (it cannot bound the joined length), while taking element [0] is cheap. `failing` mirrors
    `fails` in Python: the keys that fail, in order (with several, which comes first may differ
    between the apiserver and pydantic)."""
    return Rule(
        rule=f"self.all(k, {passes})",
        message=message,
        message_expression=f"{cel_string(lead)} + self.filter(k, {fails})[0] + {cel_string(tail)}",
        check=lambda value: not failing(value),
        explain=lambda value: f"{lead}{failing(value)[0]}{tail}",
    )


def cel_list(items: tuple[str, ...] | list[str] | frozenset[str]) -> str:
    """A CEL list literal of strings, sorted so that generated CRDs are stable."""
    return "[" + ", ".join(cel_string(item) for item in sorted(items)) + "]"


def cel_string(text: str) -> str:
    """A CEL single-quoted string literal."""
    if "'" in text or "\\" in text:
        raise ValueError(f"no quoting needed so far; refusing to guess for {text!r}")
    return f"'{text}'"
