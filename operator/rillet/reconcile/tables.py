"""What a Table's changelog topic must look like: compacted (compact,delete with retention =
expiry when windowed), co-partitioned with the App that writes it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from rillet.api.v1alpha1 import fields, tables
from rillet.reconcile import topicconfigs

DEFAULT_MIN_EXPIRY = timedelta(hours=24)


def window_expiry(window: tables.Window) -> timedelta:
    """How long a window's records are kept: its expiry, else the larger of size and 24h."""
    if window.expiry is not None:
        return fields.parse_duration(window.expiry)
    return max(fields.parse_duration(window.size), DEFAULT_MIN_EXPIRY)


def changelog_config(spec: tables.TableSpec) -> dict[str, str]:
    """Canonical topic config of the changelog: derived settings, then the user's overrides."""
    derived: dict[str, int | str] = {"cleanup.policy": "compact"}
    if spec.window is not None:
        derived["cleanup.policy"] = "compact,delete"
        derived["retention.ms"] = int(window_expiry(spec.window) / timedelta(milliseconds=1))
    return topicconfigs.canonical_config({**derived, **(spec.config or {})})


@dataclass(frozen=True)
class Writer:
    """An App that writes the Table, with the partition counts of its inputs (where known)."""

    app: str
    input_partitions: tuple[int, ...]


@dataclass(frozen=True)
class PartitionChoice:
    """The changelog's partition count (None: not decidable yet) and anything worth a warning."""

    partitions: int | None
    waiting_for: str | None = None
    warning: str | None = None


def choose_partitions(spec: tables.TableSpec, writers: Iterable[Writer]) -> PartitionChoice:
    """spec.partitions, else the input partitions of the writing App (co-partitioning)."""
    writers = sorted(writers, key=lambda w: w.app)
    known = [w for w in writers if w.input_partitions]
    writer_partitions = max(known[0].input_partitions) if known else None
    if spec.partitions is not None:
        warning = None
        if writer_partitions is not None and writer_partitions != spec.partitions:
            warning = (
                f"spec.partitions is {spec.partitions} but App {known[0].app}, which writes this "
                f"Table, reads inputs of {writer_partitions} partitions: keys will not be "
                f"co-partitioned; set spec.partitions to {writer_partitions} or remove it"
            )
        return PartitionChoice(spec.partitions, warning=warning)
    if writer_partitions is None:
        return PartitionChoice(
            None,
            waiting_for="spec.partitions is not set and no App writing this Table was found "
            "(partitions default to the writer's input partitions): set spec.partitions, or "
            "create the App that writes it",
        )
    uneven = [w.app for w in known if len(set(w.input_partitions)) > 1]
    warning = (
        f"the inputs of App {uneven[0]} have different partition counts: they are not "
        "co-partitioned with each other"
        if uneven
        else None
    )
    return PartitionChoice(writer_partitions, warning=warning)
