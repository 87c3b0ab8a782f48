"""Comparing declared topic configs with what Kafka holds, by each key's type.

Kafka reports every config value as a string; users write integers, decimals and booleans in
whatever spelling YAML allows. Values are compared in a canonical form per the key's kind, so
`0` vs `0.0`, `1000` vs `"1000"` or `compact,delete` vs `delete,compact` never make a change
(Strimzi's string comparison loops forever on such pairs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from rillet.api.v1alpha1 import topicconfigs

# Numbers whose magnitude has more decimal digits than this are compared as written. Writing one
# out in full costs time and memory without bound ("1e99999999" has a hundred million digits: a
# minute of CPU in the event loop), and no Kafka setting holds one: a long has 19 digits, a
# double's exponent stays within 308. Kafka refuses them, and says so in the status.
MAX_EXPONENT = 400


def canonical(key: str, value: int | str) -> str:
    """The value in the form Kafka would report it, for comparison."""
    text = str(value).strip()
    spec = topicconfigs.BY_NAME.get(key)
    kind = spec.kind if spec else "string"
    if kind == "boolean":
        return text.lower()
    if kind in ("integer", "number"):
        try:
            number = Decimal(text)
        except InvalidOperation:
            return text
        if not number.is_finite() or abs(number.adjusted()) > MAX_EXPONENT:
            return text
        return str(int(number)) if number == number.to_integral_value() else str(number.normalize())
    if kind == "choice" and "," in text:
        # List-valued choices (cleanup.policy) mean the same in any order.
        return ",".join(sorted(part.strip() for part in text.split(",")))
    return text


def canonical_config(config: Mapping[str, int | str]) -> dict[str, str]:
    """Every value of a config map in canonical form."""
    return {key: canonical(key, value) for key, value in config.items()}


@dataclass(frozen=True)
class ConfigDiff:
    """What an incremental alter must do: SET these keys, DELETE these overrides."""

    set: dict[str, str] = field(default_factory=dict)
    delete: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.set or self.delete)


def diff(
    desired: Mapping[str, str], overrides: Mapping[str, str], *, merge: bool = False
) -> ConfigDiff:
    """Turn Kafka's topic overrides into `desired` (canonical values on both sides).

    Only dynamic topic overrides are ever deleted: broker defaults are not the topic's to change.
    With `merge` (configPolicy Merge, an adopted topic's default) none is: the overrides the
    object does not declare are someone else's (its data may depend on a retention of theirs).
    """
    to_set = {
        key: value
        for key, value in sorted(desired.items())
        if key not in overrides or canonical(key, overrides[key]) != value
    }
    to_delete = () if merge else tuple(sorted(key for key in overrides if key not in desired))
    return ConfigDiff(set=to_set, delete=to_delete)
