"""The topic syncer's two lanes and its backpressure, checked in the stack's Kafka.

The real `TopicSyncer` and `TopicAdmin`s run in an event loop of their own (a thread), built as
the operator builds them (a Kafka client per lane); the test's thread calls them as kopf's
handlers and the resync do, and reads Kafka with a separate AdminClient: what the syncer reports
about itself is not the evidence.

Test plan:
- an apply never waits behind a resync: a one-topic apply is timed with the syncer idle
  (median of IDLE_APPLIES), then APPLIES_DURING such applies, one after the other, while the
  resync lane corrects a config on RESYNC_TOPICS topics in len(PASSES) batches of 500 and
  WRITES_OUTSTANDING blocking writes stay queued in asyncio's default executor, as the
  operator's resync queues its status writes there. Kafka lists every applied topic while the
  resync's last change is still missing there, each within max(SLOWER_THAN_IDLE x idle,
  AT_MOST_FLOOR). The latencies are in the summary.
  What this catches: the admin waiting for Kafka in the default executor, behind those writes
  (the slowest apply took 4 to 8 s). What it does not reliably catch: the lanes sharing one
  AdminClient. Through one connection an apply's request waits for the resync's request in
  flight: the slowest apply took 0.4 to 2.2 s, against 0.1 to 0.5 s with a client per lane,
  too close to this machine's noise to bound. tests/unit/test_kafka_syncing_lanes.py checks
  that each lane calls its own admin.
- a full queue blocks but never exits: CALLERS callers apply a topic each on an event lane that
  holds QUEUE_SIZE. When Kafka lists the first of their topics, more of them are still waiting
  than the queue and a batch can hold (held at the door, not refused); each is then served
  (its topic in Kafka, its outcome without a problem), and afterwards both lanes still serve.

Every topic is named under `kafka_prefix`: the `owned` fixture deletes them all afterwards.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import statistics
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

# The resync lane gets PASSES batches of the operator's default size (500), as in a pass over
# 1,500 topics: it corrects a config on RESYNC_TOPICS topics PASSES times over, a new value each
# time, so its requests are in flight for seconds while Kafka makes only 500 topics for it (a
# few seconds of the broker the other tests share).
RESYNC_TOPICS = DEFAULT_BATCH = 500
RETENTION = "retention.ms"
PASSES = ("86400000", "172800000", "259200000")  # one to three days, one value per pass
IDLE_APPLIES = APPLIES_DURING = 3
# How much slower than idle an apply during the resync may land, and the least bound given: an
# apply lands in 0.1 to 0.2 s idle and 0.1 to 0.5 s during the resync (its CPU slows the apply
# on this 2-core machine). When the admin waited for Kafka in asyncio's default executor, behind
# the resync's writes, the slowest apply took 4 to 8 s.
SLOWER_THAN_IDLE = 5
AT_MOST_FLOOR = 1.5
# The resync's status patches and Events: a batch's 500 outcomes queue a patch and an Event
# each in asyncio's default executor (6 threads on 2 cores), each holding a thread about as long
# as a call to the apiserver: seconds of writes.
WRITES_OUTSTANDING, WRITE_SECONDS = 500, 0.02
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

    def keep_writing(self, outstanding: int) -> concurrent.futures.Future[None]:
        """Keep `outstanding` blocking writes queued in the loop's default executor, as the
        resync's status patches and Events are there (k8s/writing.py) while it reports its
        batches: each holds a thread for WRITE_SECONDS, as a call to the apiserver does. They go
        on until the loop's tasks are cancelled at the end."""

        async def write() -> None:
            await asyncio.to_thread(time.sleep, WRITE_SECONDS)

        async def writing() -> None:
            queued: set[asyncio.Future[None]] = set()
            while True:
                queued |= {asyncio.ensure_future(write()) for _ in range(outstanding - len(queued))}
                _, queued = await asyncio.wait(queued, return_when=asyncio.FIRST_COMPLETED)

        return asyncio.run_coroutine_threadsafe(writing(), self.loop)

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
        # As handlers/lifecycle.py builds it: a Kafka client per lane.
        config = {"bootstrap.servers": bootstrap}
        syncer = TopicSyncer(
            TopicAdmin(config, name="events"),
            resync_admin=TopicAdmin(config, name="resync"),
            max_batch=max_batch,
            queue_size=queue_size,
        )
        return syncer, asyncio.create_task(syncer.run(), name="topic-syncer")

    async def stop(syncer: TopicSyncer) -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        syncer.close()
        await loop.shutdown_default_executor()

    syncer, serving = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=30)
    try:
        yield _Running(loop, syncer, serving)
    finally:
        asyncio.run_coroutine_threadsafe(stop(syncer), loop).result(timeout=60)
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
    """Make topics with the test's own client, and wait until Kafka has made them all."""
    for start in range(0, len(names), DEFAULT_BATCH):
        chunk = [NewTopic(name, 1) for name in names[start : start + DEFAULT_BATCH]]
        for future in admin.create_topics(chunk, operation_timeout=60).values():
            future.result(timeout=90)
    # Kafka lists them before its broker has made their logs, and shows a topic created later
    # only once it has (an apply right after took 2 to 7 s, idle): one more topic, listed, says
    # the broker caught up.
    caught_up = f"{prefix}caught-up"
    admin.create_topics([NewTopic(caught_up, 1)])[caught_up].result(timeout=90)
    wait_for(
        lambda: len(_listed(admin, prefix)) > len(names),
        timeout=180,
        what=f"Kafka to show the {len(names)} topics the resync will change, and one more",
    )


def _apply(
    running: _Running, admin: AdminClient, topic: DesiredTopic
) -> tuple[float, concurrent.futures.Future[SyncOutcome]]:
    """Apply `topic` on the event lane: the seconds until Kafka lists it, and its outcome (which
    may come later: the syncer describes the topic once more after creating it)."""
    began = time.monotonic()
    outcome = running.sync(topic)
    wait_for(
        lambda: topic.name in admin.list_topics(timeout=10).topics,
        timeout=60,
        interval=0.02,
        what=f"topic {topic.name} in Kafka",
    )
    return time.monotonic() - began, outcome


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
    drifted = [
        DesiredTopic(name, partitions=1, replication_factor=None, config={RETENTION: value})
        for value in PASSES
        for name in names
    ]
    with _syncer(kafka_bootstrap, max_batch=DEFAULT_BATCH, queue_size=10_000) as running:
        idle_seconds = []
        for i in range(IDLE_APPLIES):
            topic = _topic(f"{kafka_prefix}-idle-{i}")
            seconds, outcome = _apply(running, kafka_admin, topic)
            assert _served(outcome.result(timeout=30), topic.name)
            idle_seconds.append(seconds)
        idle = statistics.median(idle_seconds)
        began = time.monotonic()
        resync = [running.sync(topic, resync=True) for topic in drifted]
        writes = running.keep_writing(WRITES_OUTSTANDING)
        # Under way: Kafka has the resync's first change (and not yet its last, checked below).
        wait_for(
            lambda: _retention(kafka_admin, [first])[first] == PASSES[0],
            timeout=120,
            interval=0.05,
            what="the resync's first change in Kafka",
        )
        applied_at = time.monotonic()
        # One after the other: each meets the resync at another step (a describe, an alter).
        applied = [_topic(f"{kafka_prefix}-applied-{i}") for i in range(APPLIES_DURING)]
        applies = [_apply(running, kafka_admin, topic) for topic in applied]
        last_then = _retention(kafka_admin, [last])[last]
        assert not writes.done(), "the writes stopped"
        wait_for(
            lambda: _retention(kafka_admin, [last])[last] == PASSES[-1],
            timeout=120,
            interval=0.05,
            what="the resync's last change in Kafka",
        )
        resync_done = time.monotonic()
        assert all(
            _served(outcome.result(timeout=60), topic.name)
            for (_, outcome), topic in zip(applies, applied, strict=True)
        )
        outcomes = [future.result(timeout=60) for future in resync]
        assert all(
            o.applied == (f"set config {RETENTION} on {t.name}",)
            for o, t in zip(outcomes, drifted, strict=True)
        )
        assert set(_retention(kafka_admin, names).values()) == {PASSES[-1]}

    during = [seconds for seconds, _ in applies]
    measurement(
        f"applies during a resync of {len(drifted)} topics: in Kafka after "
        f"{', '.join(f'{s:.2f}' for s in during)} s, idle {idle:.2f} s (median of "
        f"{IDLE_APPLIES}); the resync took {resync_done - began:.1f} s, "
        f"{resync_done - applied_at:.1f} s of it after the first apply"
    )
    assert last_then != PASSES[-1], "Kafka showed the applied topics only after the whole resync"
    bound = max(SLOWER_THAN_IDLE * idle, AT_MOST_FLOOR)
    assert max(during) <= bound, (
        f"an apply waited behind the resync: in Kafka after {max(during):.2f} s, "
        f"{max(during) / idle:.1f}x its {idle:.2f} s idle (bound {bound:.2f} s)"
    )


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
