"""Pure: turn pydantic's JSON schema of a model into a Kubernetes structural schema.

The apiserver only accepts structural schemas: every node has a `type` (save int-or-string
nodes), no `$ref`, no `anyOf` that mixes types (save the int-or-string idiom), no `title`, no
`additionalProperties: false`. `structural()` rewrites what pydantic emits:

- `$ref` to `$defs` is inlined; keys next to the `$ref` (the field's description, its rules)
  win over, or add to, those of the referenced model;
- `Optional[X]` (anyOf with `{"type": "null"}`) becomes X, and `default: null` disappears;
- `const` becomes a one-value `enum`; `title` and `additionalProperties: <bool>` are dropped;
- keys come out in one fixed order, so generated files are stable and readable.

`violations()` checks the result against the rules above, plus "every node has a description"
and "every integer has a minimum and a maximum" (so the apiserver refuses a number before it
overflows a fixed-width integer in the operator or the Kafka client).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

Schema = dict[str, Any]

# The keys a node may have, in the order they are written out.
KEY_ORDER = (
    "description",
    "type",
    "format",
    "x-kubernetes-int-or-string",
    "anyOf",
    "enum",
    "default",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-preserve-unknown-fields",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "x-kubernetes-validations",
)
_ALLOWED = frozenset(KEY_ORDER)
_RULE_KEY_ORDER = ("rule", "message", "messageExpression", "fieldPath", "reason", "optionalOldSelf")
_NULL = {"type": "null"}


class SchemaError(ValueError):
    """The model produced a JSON schema that has no structural equivalent."""


def structural(schema: Mapping[str, Any]) -> Schema:
    """The structural schema of a pydantic model's JSON schema (see the module docstring)."""
    definitions: Mapping[str, Any] = schema.get("$defs", {})
    root = {key: value for key, value in schema.items() if key != "$defs"}
    return _convert(root, definitions, path="")


def _convert(node: Mapping[str, Any], definitions: Mapping[str, Any], *, path: str) -> Schema:
    if "$ref" in node:
        return _convert_ref(node, definitions, path=path)
    if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
        return _convert_optional(node, definitions, path=path)
    result: Schema = {}
    for key, value in node.items():
        if key in {"title", "additionalProperties"} and not isinstance(value, dict):
            continue  # titles are noise; extra="forbid" is enforced by pruning, not by schema
        if key == "default" and value is None:
            continue
        if key == "const":
            result["enum"] = [value]
        elif key == "properties":
            result[key] = {
                name: _convert(child, definitions, path=f"{path}.{name}")
                for name, child in value.items()
            }
        elif key in {"items", "additionalProperties"}:
            result[key] = _convert(value, definitions, path=f"{path}[*]")
        elif key == "anyOf":
            result[key] = [_convert(branch, definitions, path=path) for branch in value]
        elif key not in _ALLOWED:
            raise SchemaError(f"{path or '.'}: {key!r} has no place in a structural schema")
        else:
            result[key] = value
    return ordered(result)


def _convert_ref(node: Mapping[str, Any], definitions: Mapping[str, Any], *, path: str) -> Schema:
    name = node["$ref"].removeprefix("#/$defs/")
    if name not in definitions:
        raise SchemaError(f"{path or '.'}: unresolved reference {node['$ref']}")
    target = _convert(definitions[name], definitions, path=path)
    siblings = _convert({k: v for k, v in node.items() if k != "$ref"}, definitions, path=path)
    return _overlay(target, siblings)


def _convert_optional(
    node: Mapping[str, Any], definitions: Mapping[str, Any], *, path: str
) -> Schema:
    branches = [branch for branch in node["anyOf"] if branch != _NULL]
    if len(branches) != 1:
        raise SchemaError(f"{path or '.'}: anyOf of several types; use one type per field")
    inner = _convert(branches[0], definitions, path=path)
    outer = _convert({k: v for k, v in node.items() if k != "anyOf"}, definitions, path=path)
    return _overlay(inner, outer)


def _overlay(base: Schema, top: Schema) -> Schema:
    """`base` with the keys of `top` on it; validation rules of both are kept."""
    merged = dict(base)
    for key, value in top.items():
        if key == "x-kubernetes-validations":
            merged[key] = [*base.get(key, []), *value]
        else:
            merged[key] = value
    return ordered(merged)


def ordered(node: Mapping[str, Any]) -> Schema:
    """`node` with its keys (and the keys of its rules) in KEY_ORDER."""
    rank = {key: index for index, key in enumerate(KEY_ORDER)}
    result = {key: node[key] for key in sorted(node, key=lambda k: rank.get(k, len(rank)))}
    if "x-kubernetes-validations" in result:
        result["x-kubernetes-validations"] = [
            {key: rule[key] for key in _RULE_KEY_ORDER if key in rule}
            for rule in result["x-kubernetes-validations"]
        ]
    return result


def walk(node: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every node of a structural schema with its path (`.spec.inputs[*].name`), root first."""
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[*]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}[*]")


def violations(schema: Mapping[str, Any], *, skip: frozenset[str] = frozenset()) -> list[str]:
    """What keeps `schema` from being a structural, fully described and bounded schema (empty if
    nothing).

    Fields must have a description; the root, list items and map values may go without (their
    field describes them), as may the nodes whose path is in `skip` (e.g. `.metadata`).
    """
    found: list[str] = []
    for path, node in walk(schema):
        where = path or "."
        int_or_string = node.get("x-kubernetes-int-or-string") is True
        if "type" not in node and not int_or_string:
            found.append(f"{where}: no type")
        if "anyOf" in node and not int_or_string:
            found.append(f"{where}: anyOf outside an int-or-string node")
        described = path == "" or path.endswith("[*]") or path in skip
        if "description" not in node and not described:
            found.append(f"{where}: no description")
        found.extend(f"{where}: {key!r} is not allowed" for key in node if key not in _ALLOWED)
        integer = node.get("type") == "integer" or int_or_string
        found.extend(
            f"{where}: an integer without a {bound}"
            for bound in ("minimum", "maximum")
            if integer and bound not in node
        )
        if "properties" in node and "additionalProperties" in node:
            found.append(f"{where}: both properties and additionalProperties")
        found.extend(
            f"{where}: a rule without a message: {rule['rule']}"
            for rule in node.get("x-kubernetes-validations", ())
            if not rule.get("message") and not rule.get("messageExpression")
        )
    return found
