"""The topic syncer's queueing: two independent lanes, and a full queue that holds its callers.

Pure queueing, no I/O: the admin is a stand-in whose calls for chosen topics hang until the
test lets them go, so "a batch still in Kafka" lasts exactly as long as the test says. What
Kafka does with these requests is tests/integration/test_topic_sync_lanes.py's part.

Test plan:
- while a resync batch hangs in its admin call, an apply on the event lane is created and
  reported; the resync is reported only once let go;
- given a resync admin, each lane calls only its own admin (the operator gives each lane its own
  Kafka client, so an apply's requests never queue behind the resync's), deletions go through
  the event lane's, and closing the syncer closes both;
- with the event lane's batch hanging and its queue full, further callers wait (not done, not
  refused) and the loops keep running; let go, every caller is served, in batches no larger
  than the batch size, and both lanes still serve afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import cast

from rillet.kafka.admin import TopicAdmin
from rillet.kafka.syncing import TopicSyncer
from rillet.kafka.topicrequests import KafkaFailure
from rillet.reconcile.topicconfigs import ConfigDiff
from rillet.reconcile.topics import DesiredTopic, ObservedTopic, SyncOutcome

TIMEOUT = 5.0


class HeldAdmin:
    """Creates topics in memory; a call naming a topic under `held` waits until `release`."""

    def __init__(self, held: str) -> None:
        self.held = held
        self.released = asyncio.Event()
        self.holding = asyncio.Event()  # set once a call waits
        self.topics: dict[str, int] = {}
        self.batches: list[list[str]] = []
        self.described: list[str] = []
        self.deleted: list[str] = []
        self.closed = False

    async def _hold(self, names: Iterable[str]) -> None:
        if any(name.startswith(self.held) for name in names):
            self.holding.set()
            await self.released.wait()

    async def describe(
        self, names: Iterable[str]
    ) -> dict[str, ObservedTopic | KafkaFailure | None]:
        names = sorted(set(names))
        self.described += names
        await self._hold(names)
        return {
            name: ObservedTopic(name, f"id-{name}", self.topics[name], 1)
            if name in self.topics
            else None
            for name in names
        }

    async def create(self, topics: Sequence[DesiredTopic]) -> dict[str, KafkaFailure | None]:
        self.batches.append([t.name for t in topics])
        self.topics |= {t.name: t.partitions for t in topics}
        return {t.name: None for t in topics}

    async def grow(self, partitions: Mapping[str, int]) -> dict[str, KafkaFailure | None]:
        return {name: None for name in partitions}

    async def alter_configs(
        self, diffs: Mapping[str, ConfigDiff]
    ) -> dict[str, KafkaFailure | None]:
        return {name: None for name in diffs}

    async def delete(self, names: Sequence[str]) -> dict[str, KafkaFailure | None]:
        self.deleted += names
        return {name: None for name in names}

    def close(self) -> None:
        self.closed = True


def _topic(name: str) -> DesiredTopic:
    return DesiredTopic(name=name, partitions=3, replication_factor=None)


def _created(outcome: SyncOutcome, name: str) -> bool:
    return outcome.observed is not None and outcome.applied == (
        f"created topic {name} with 3 partitions",
    )


def test_an_apply_passes_a_resync_batch_that_hangs() -> None:
    async def scenario() -> None:
        admin = HeldAdmin(held="resync-")
        syncer = TopicSyncer(cast(TopicAdmin, admin), queue_size=100)
        serving = asyncio.create_task(syncer.run())
        resync = asyncio.gather(
            *(syncer.sync(_topic(f"resync-{i}"), resync=True) for i in range(50))
        )
        await asyncio.wait_for(admin.holding.wait(), TIMEOUT)

        applied = await asyncio.wait_for(syncer.sync(_topic("applied")), TIMEOUT)

        assert _created(applied, "applied")
        assert admin.topics == {"applied": 3}
        assert not resync.done()
        admin.released.set()
        outcomes = await asyncio.wait_for(resync, TIMEOUT)
        assert all(_created(o, f"resync-{i}") for i, o in enumerate(outcomes))
        assert not serving.done()
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)

    asyncio.run(scenario())


def test_each_lane_calls_its_own_admin() -> None:
    async def scenario() -> None:
        events, resyncs = HeldAdmin(held="resync-"), HeldAdmin(held="none")
        syncer = TopicSyncer(
            cast(TopicAdmin, events), resync_admin=cast(TopicAdmin, resyncs), queue_size=100
        )
        serving = asyncio.create_task(syncer.run())
        resync = asyncio.gather(
            *(syncer.sync(_topic(f"resync-{i}"), resync=True) for i in range(20))
        )
        applied = await asyncio.wait_for(syncer.sync(_topic("applied")), TIMEOUT)
        await asyncio.wait_for(resync, TIMEOUT)
        assert await asyncio.wait_for(syncer.delete("applied", owner="uid-1"), TIMEOUT) is None

        assert _created(applied, "applied")
        assert set(events.described) == {"applied"}
        assert events.batches == [["applied"]]
        assert events.deleted == ["applied"]
        assert set(resyncs.described) == {f"resync-{i}" for i in range(20)}
        assert sorted(n for b in resyncs.batches for n in b) == sorted(
            f"resync-{i}" for i in range(20)
        )
        assert not events.holding.is_set()
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        syncer.close()
        assert events.closed
        assert resyncs.closed

    asyncio.run(scenario())


def test_a_full_queue_holds_its_callers_then_serves_them_all() -> None:
    queue_size, batch, callers = 4, 3, 40

    async def scenario() -> None:
        admin = HeldAdmin(held="crowd-")
        syncer = TopicSyncer(cast(TopicAdmin, admin), max_batch=batch, queue_size=queue_size)
        serving = asyncio.create_task(syncer.run())
        crowd = [asyncio.create_task(syncer.sync(_topic(f"crowd-{i:02d}"))) for i in range(callers)]
        await asyncio.wait_for(admin.holding.wait(), TIMEOUT)
        # Every caller has run by now (they were started before the lane took its batch): one
        # batch hangs in the admin call, the queue is full, and the rest wait at its door.
        assert not [task for task in crowd if task.done()]
        assert not serving.done()
        admin.released.set()
        outcomes = await asyncio.wait_for(asyncio.gather(*crowd), TIMEOUT)

        assert all(_created(o, f"crowd-{i:02d}") for i, o in enumerate(outcomes))
        assert sorted(n for b in admin.batches for n in b) == [f"crowd-{i:02d}" for i in range(40)]
        assert max(len(b) for b in admin.batches) <= batch
        assert not serving.done()
        late = await asyncio.wait_for(syncer.sync(_topic("late")), TIMEOUT)
        late_resync = await asyncio.wait_for(syncer.sync(_topic("late-r"), resync=True), TIMEOUT)
        assert _created(late, "late")
        assert _created(late_resync, "late-r")
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)

    asyncio.run(scenario())
