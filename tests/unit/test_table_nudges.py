"""Nudging a Table when its writer App appears: when it runs and what it writes (fakes, no I/O).

Test plan:
- a nudge waits for the Table's own handler to settle it (status at its generation), then
  reconciles it on the event lane with the writer's partitions and writes Ready on the
  resourceVersion it read;
- a write refused for a newer resourceVersion is tried again from the newer body;
- a Table gone, or never settled within the wait, is left alone (its handler and the resync
  own it);
- nudges of a Table during a run coalesce into one more run.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any, cast

import pytest

from rillet.handlers import indexes, nudging, tables
from rillet.reconcile.topics import DesiredTopic, ObservedTopic, SyncOutcome

NAMESPACE, TABLE = "team", "counts"
KEY = (NAMESPACE, TABLE)


def _body(*, observed: int | None, version: str) -> dict[str, Any]:
    status = {} if observed is None else {"observedGeneration": observed}
    return {
        "apiVersion": "rillet.io/v1alpha1",
        "kind": "Table",
        "metadata": {
            "name": TABLE,
            "namespace": NAMESPACE,
            "uid": "u-1",
            "generation": 1,
            "resourceVersion": version,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"valueFormat": "json", "valueSchema": "word STRING, n BIGINT"},
        "status": status,
    }


class FakeSyncer:
    def __init__(self) -> None:
        self.synced: list[tuple[DesiredTopic, bool]] = []

    async def sync(self, desired: DesiredTopic, *, resync: bool = False) -> SyncOutcome:
        self.synced.append((desired, resync))
        observed = ObservedTopic(
            name=desired.name,
            topic_id="id",
            partitions=desired.partitions,
            replication_factor=1,
            overrides=dict(desired.config),
        )
        return SyncOutcome(observed=observed)


class FakeWriter:
    """Records status writes; a write that succeeds shows in the index, as its watch event would."""

    def __init__(
        self, index: dict[tuple[str, str], list[dict[str, Any]]], refusals: int = 0
    ) -> None:
        self.index, self.refusals = index, refusals
        self.writes: list[tuple[str, dict[str, Any]]] = []
        self.events: list[str] = []

    async def patch_status(
        self,
        plural: str,
        namespace: str,
        name: str,
        patch: dict[str, Any],
        *,
        resource_version: str,
    ) -> bool:
        self.writes.append((resource_version, patch))
        if self.refusals:
            self.refusals -= 1
            return False
        updated = copy.deepcopy(self.index[(namespace, name)][-1])
        updated["status"] |= patch
        updated["metadata"]["resourceVersion"] = str(int(resource_version) + 10)
        self.index[(namespace, name)] = [updated]
        return True

    async def post_event(
        self, body: dict[str, Any], *, type_: str, reason: str, message: str
    ) -> None:
        self.events.append(reason)


def _nudger(
    index: dict[tuple[str, str], list[dict[str, Any]]], writer: FakeWriter, syncer: FakeSyncer
) -> nudging.Nudger:
    views = indexes.Views(
        topic_claims=cast(Any, {}),
        table_claims=cast(Any, {}),
        table_writers=cast(Any, {KEY: [("counter", ("words",), None)]}),
        topic_partitions=cast(Any, {(NAMESPACE, "words"): [3]}),
        topic_namespaces=cast(Any, {}),
        table_namespaces=cast(Any, {}),
    )
    return nudging.Nudger(
        plural=tables.PLURAL,
        index=cast(Any, index),
        build=tables.subject_for,
        views=views,
        syncer=cast(Any, syncer),
        writer=cast(Any, writer),
    )


async def _settle_later(index: dict[Any, list[dict[str, Any]]], body: dict[str, Any]) -> None:
    await asyncio.sleep(0.3)
    index[KEY] = [body]


def test_a_nudge_waits_for_the_handler_then_writes_ready() -> None:
    index = {KEY: [_body(observed=None, version="1")]}
    writer, syncer = FakeWriter(index), FakeSyncer()

    async def scenario() -> None:
        nudger = _nudger(index, writer, syncer)
        nudger.nudge(NAMESPACE, [TABLE])
        await _settle_later(index, _body(observed=1, version="2"))
        await asyncio.sleep(0.5)

    asyncio.run(scenario())
    ((version, patch),) = writer.writes
    assert version == "2"
    assert [c["status"] for c in patch["conditions"] if c["type"] == "Ready"] == ["True"]
    assert patch["writers"] == ["counter"]
    ((desired, resync),) = syncer.synced
    assert (desired.partitions, resync) == (3, False)


def test_a_conflict_is_tried_again_from_the_newer_body() -> None:
    index = {KEY: [_body(observed=1, version="2")]}
    writer, syncer = FakeWriter(index, refusals=1), FakeSyncer()

    async def scenario() -> None:
        nudger = _nudger(index, writer, syncer)
        nudger.nudge(NAMESPACE, [TABLE])
        await asyncio.sleep(0.05)
        index[KEY] = [_body(observed=1, version="3")]
        await asyncio.sleep(0.5)

    asyncio.run(scenario())
    assert [version for version, _ in writer.writes] == ["2", "3"]


def test_a_table_gone_or_never_settled_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nudging, "SETTLE_SECONDS", 0.3)
    index = {KEY: [_body(observed=None, version="1")]}
    writer, syncer = FakeWriter(index), FakeSyncer()

    async def scenario() -> None:
        nudger = _nudger(index, writer, syncer)
        nudger.nudge(NAMESPACE, [TABLE, "gone"])
        await asyncio.sleep(0.6)

    asyncio.run(scenario())
    assert writer.writes == []
    assert syncer.synced == []


def test_nudges_during_a_run_coalesce_into_one_more() -> None:
    index = {KEY: [_body(observed=None, version="1")]}
    writer, syncer = FakeWriter(index), FakeSyncer()

    async def scenario() -> None:
        nudger = _nudger(index, writer, syncer)
        for _ in range(5):
            nudger.nudge(NAMESPACE, [TABLE])
        await _settle_later(index, _body(observed=1, version="2"))
        await asyncio.sleep(0.5)

    asyncio.run(scenario())
    assert len(syncer.synced) == 2  # the run, and one more for the nudges that came meanwhile
    assert len(writer.writes) == 1  # the second found the Table Ready already
