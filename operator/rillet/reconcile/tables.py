"""What a Table's changelog topic must look like: compacted (compact,delete with retention =
expiry when windowed), co-partitioned with the App that writes it.

A window stays open to late records for its size plus the allowed lateness of its writer's
inputs (the watermark passes its end only then). Kafka Streams refuses a window store whose
retention is shorter than size + grace; here the default expiry is at least that long, and a
shorter explicit expiry gets a warning: Kafka would delete windows that late records can still
update, and a lookup would miss them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from rillet.api.v1alpha1 import fields, tables
from rillet.reconcile import topicconfigs

DEFAULT_MIN_EXPIRY = timedelta(hours=24)


@dataclass(frozen=True)
class Writer:
    """An App that writes the Table, with the partition counts of its inputs (where known) and
    the longest allowedLateness of its inputs (None: no event time declared)."""

    app: str
    input_partitions: tuple[int, ...]
    lateness: str | None = None


def _open_for(window: tables.Window, writers: Iterable[Writer]) -> tuple[timedelta, Writer | None]:
    """How long a window stays open to late records, and the writer that decides it."""
    late = [(fields.parse_duration(w.lateness), w) for w in writers if w.lateness is not None]
    latest = max(late, key=lambda pair: (pair[0], pair[1].app), default=None)
    size = fields.parse_duration(window.size)
    return (size + latest[0], latest[1]) if latest else (size, None)


def window_expiry(window: tables.Window, writers: Iterable[Writer] = ()) -> timedelta:
    """How long a window's records are kept: its expiry, else the larger of 24h and the time
    the window stays open (its size plus the writers' longest allowed lateness)."""
    if window.expiry is not None:
        return fields.parse_duration(window.expiry)
    return max(_open_for(window, writers)[0], DEFAULT_MIN_EXPIRY)


def expiry_warning(spec: tables.TableSpec, writers: Iterable[Writer]) -> str | None:
    """Why an explicit window.expiry is too short for the lateness its writer allows, or None."""
    window = spec.window
    if window is None or window.expiry is None:
        return None
    open_for, writer = _open_for(window, writers)
    if writer is None or fields.parse_duration(window.expiry) >= open_for:
        return None
    needed = int(open_for.total_seconds())
    return (
        f"window.expiry {window.expiry} is shorter than the {needed}s a window stays open to late "
        f"records (window.size {window.size} + allowedLateness {writer.lateness} of App "
        f"{writer.app}): Kafka would delete windows that late records still update; create the "
        f"Table again with window.expiry of at least {needed}s, or without one"
    )


def changelog_config(spec: tables.TableSpec, writers: Iterable[Writer] = ()) -> dict[str, str]:
    """Canonical topic config of the changelog: derived settings, then the user's overrides."""
    derived: dict[str, int | str] = {"cleanup.policy": "compact"}
    if spec.window is not None:
        derived["cleanup.policy"] = "compact,delete"
        expiry = window_expiry(spec.window, writers)
        derived["retention.ms"] = int(expiry / timedelta(milliseconds=1))
    return topicconfigs.canonical_config({**derived, **(spec.config or {})})


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
