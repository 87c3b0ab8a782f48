"""The topic syncer's two lanes and its backpressure, checked in the stack's Kafka.

The real `TopicSyncer` and `TopicAdmin` run in an event loop of their own (a thread), as in the
operator; the test's thread calls them as kopf's handlers and the resync do, and reads Kafka
with a separate AdminClient: what the syncer reports about itself is not the evidence.

Test plan:
- an apply never waits behind a resync: a resync pass corrects a config on RESYNC_TOPICS
  existing topics; once Kafka shows its first change, one topic is applied on the event lane.
  Kafka lists the applied topic while the resync's last change is still missing there. (The
  apply does wait for the resync's request in flight: both lanes share one AdminClient, whose
  connection the broker serves one request at a time. Measured here: 2.5 to 4 s against 0.1 s
  idle, in a resync of 14 s. The measurement is printed in the summary.)
- a full queue blocks but never exits: CALLERS callers apply a topic each on an event lane that
  holds QUEUE_SIZE. When Kafka lists the first of their topics, more of them are still waiting
  than the queue and a batch can hold (held at the door, not refused); each is then served
  (its topic in Kafka, its outcome without a problem), and afterwards both lanes still serve.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from rillet.kafka.admin import TopicAdmin
from rillet.kafka.syncing import TopicSyncer
from rillet.reconcile.topics import DesiredTopic, SyncOutcome

from .polling import wait_for

T = TypeVar("T")

# Enough topics that the resync takes several batches of the operator's default size (500) on
# the stack's broker: seconds of admin calls, as a pass over thousands of topics does.
RESYNC_TOPICS = 4_000
DEFAULT_BATCH = 500
RETENTION, WEEK = "retention.ms", "604800000"
# A lane small enough to overflow many times over.
QUEUE_SIZE = 5
SMALL_BATCH = 5
CALLERS = 120


@dataclass
class _Running:
    """A syncer serving its lanes in the event loop of its own thread."""

    loop: asyncio.AbstractEventLoop
    syncer: TopicSyncer
    serving: asyncio.Task[None]

    def call(self, coroutine: Callable[[], Coroutine[Any, Any, T]]) -> concurrent.futures.Future[T]:
        """Run `coroutine()` in the syncer's loop, as a handler of the operator would."""

        async def run() -> T:
            return await coroutine()

        return asyncio.run_coroutine_threadsafe(run(), self.loop)

    def sync(
        self, desired: DesiredTopic, *, resync: bool = False
    ) -> concurrent.futures.Future[SyncOutcome]:
        return self.call(lambda: self.syncer.sync(desired, resync=resync))

    def serving_still(self) -> bool:
        """Whether the lanes' loops still run (`run` ends only if one of them ended)."""
        return self.call(lambda: _alive(self.serving)).result(timeout=10)


async def _alive(task: asyncio.Task[None]) -> bool:
    return not task.done()


@contextlib.contextmanager
def _syncer(bootstrap: str, *, max_batch: int, queue_size: int) -> Iterator[_Running]:
    """A TopicSyncer on the stack's Kafka, its lanes served in a thread until the end."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="topic-syncer", daemon=True)
    thread.start()

    async def start() -> tuple[TopicSyncer, asyncio.Task[None]]:
        admin = TopicAdmin({"bootstrap.servers": bootstrap})
        syncer = TopicSyncer(admin, max_batch=max_batch, queue_size=queue_size)
        return syncer, asyncio.create_task(syncer.run(), name="topic-syncer")

    async def stop() -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await loop.shutdown_default_executor()

    syncer, serving = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=30)
    try:
        yield _Running(loop, syncer, serving)
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()


def _topic(name: str) -> DesiredTopic:
    return DesiredTopic(name=name, partitions=1, replication_factor=None)


def _listed(admin: AdminClient, prefix: str) -> set[str]:
    """The topics under `prefix` that Kafka lists now."""
    return {name for name in admin.list_topics(timeout=10).topics if name.startswith(prefix)}


def _served(outcome: SyncOutcome, name: str) -> bool:
    """Whether an outcome says the topic was made, with no problem (whether Kafka shows it is
    for Kafka to say)."""
    return (
        not outcome.problems
        and outcome.unavailable is None
        and not outcome.superseded
        and any(line.startswith(f"created topic {name} ") for line in outcome.applied)
    )


def _retention(admin: AdminClient, names: list[str]) -> dict[str, str | None]:
    """Each topic's retention.ms override as Kafka has it (None: no override)."""
    resources = {ConfigResource(ResourceType.TOPIC, name): name for name in names}
    found = admin.describe_configs(list(resources), request_timeout=30)
    retention: dict[str, str | None] = {}
    for resource, future in found.items():
        entry = future.result(timeout=60)[RETENTION]
        overridden = entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        retention[resources[resource]] = entry.value if overridden else None
    return retention


def _create(admin: AdminClient, names: list[str], *, prefix: str) -> None:
    """Make topics with the test's own client, and wait until Kafka lists them all."""
    for start in range(0, len(names), DEFAULT_BATCH):
        chunk = [NewTopic(name, 1) for name in names[start : start + DEFAULT_BATCH]]
        for future in admin.create_topics(chunk, operation_timeout=60).values():
            future.result(timeout=90)
    wait_for(
        lambda: len(_listed(admin, prefix)) >= len(names),
        timeout=180,
        what=f"Kafka to list the {len(names)} topics the resync will change",
    )


def test_an_apply_is_not_queued_behind_a_resync(
    kafka_bootstrap: str,
    kafka_admin: AdminClient,
    kafka_prefix: str,
    measurement: Callable[[str], None],
) -> None:
    # The resync corrects drift (a config) on existing topics rather than making new ones: a
    # broker shows a new topic only once it has made the logs of every topic created before it,
    # which would put Kafka's own backlog, not the lanes, between the apply and its result.
    resync_prefix = f"{kafka_prefix}-resync-"
    names = [f"{resync_prefix}{i:05d}" for i in range(RESYNC_TOPICS)]
    _create(kafka_admin, names, prefix=resync_prefix)
    first, last = names[0], names[-1]
    applied = _topic(f"{kafka_prefix}-applied")
    drifted = [
        DesiredTopic(name, partitions=1, replication_factor=None, config={RETENTION: WEEK})
        for name in names
    ]
    with _syncer(kafka_bootstrap, max_batch=DEFAULT_BATCH, queue_size=10_000) as running:
        began = time.monotonic()
        passes = [running.sync(topic, resync=True) for topic in drifted]
        # Under way: Kafka has the resync's first change (and not yet its last, checked below).
        wait_for(
            lambda: _retention(kafka_admin, [first])[first] == WEEK,
            timeout=120,
            interval=0.05,
            what="the resync's first change in Kafka",
        )
        applied_at = time.monotonic()
        apply = running.sync(applied)
        seen: dict[str, Any] = {}

        def applied_topic_listed() -> bool:
            if applied.name not in kafka_admin.list_topics(timeout=10).topics:
                return False
            seen["at"] = time.monotonic()
            seen["last"] = _retention(kafka_admin, [last])[last]
            return True

        wait_for(applied_topic_listed, timeout=120, interval=0.02, what="the applied topic")
        wait_for(
            lambda: _retention(kafka_admin, [last])[last] == WEEK,
            timeout=300,
            interval=0.05,
            what="the resync's last change in Kafka",
        )
        resync_done = time.monotonic()
        assert _served(apply.result(timeout=30), applied.name)
        outcomes = [future.result(timeout=60) for future in passes]
        assert all(
            o.applied == (f"set config {RETENTION} on {t.name}",)
            for o, t in zip(outcomes, drifted, strict=True)
        )
        assert set(_retention(kafka_admin, names).values()) == {WEEK}

    apply_seconds = seen["at"] - applied_at
    measurement(
        f"apply during a resync of {RESYNC_TOPICS} topics: in Kafka after {apply_seconds:.2f} s; "
        f"the resync took {resync_done - began:.1f} s, {resync_done - applied_at:.1f} s of it "
        f"after the apply"
    )
    assert seen["last"] != WEEK, "Kafka showed the applied topic only after the whole resync"


def test_a_full_queue_holds_callers_and_serves_them_all(
    kafka_bootstrap: str, kafka_admin: AdminClient, kafka_prefix: str
) -> None:
    prefix = f"{kafka_prefix}-crowd-"
    crowd = [_topic(f"{prefix}{i:04d}") for i in range(CALLERS)]
    with _syncer(kafka_bootstrap, max_batch=SMALL_BATCH, queue_size=QUEUE_SIZE) as running:
        callers = [running.sync(topic) for topic in crowd]
        first = wait_for(
            lambda: _listed(kafka_admin, prefix),
            timeout=60,
            interval=0.02,
            what="the first of the callers' topics in Kafka",
        )
        waiting = [future for future in callers if not future.done()]
        refused = [f.exception() for f in callers if f.done() and f.exception() is not None]
        # The lane holds QUEUE_SIZE requests and works on one batch: any caller past those is
        # held at the queue's door. None of them is turned away.
        assert not refused, f"callers refused while the queue was full: {refused[:3]}"
        assert len(waiting) > QUEUE_SIZE + SMALL_BATCH, (
            f"{len(waiting)} callers waiting when Kafka listed {len(first)} of their topics"
        )

        wait_for(
            lambda: len(_listed(kafka_admin, prefix)) == CALLERS,
            timeout=180,
            interval=0.2,
            what=f"all {CALLERS} callers' topics in Kafka",
        )
        outcomes = [future.result(timeout=60) for future in callers]
        unserved = [t.name for o, t in zip(outcomes, crowd, strict=True) if not _served(o, t.name)]
        assert not unserved, f"callers not served: {unserved[:5]}"

        # Both lanes' loops outlived the crowd, and each still serves.
        assert running.serving_still()
        after = [_topic(f"{kafka_prefix}-after-event"), _topic(f"{kafka_prefix}-after-resync")]
        running.sync(after[0]).result(timeout=60)
        running.sync(after[1], resync=True).result(timeout=60)
        assert {t.name for t in after} <= _listed(kafka_admin, f"{kafka_prefix}-after-")
        assert running.serving_still()
