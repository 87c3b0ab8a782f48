"""Bringing topics in line with their declarations, many at a time.

Reconciles of single objects queue here; a loop takes what is queued (up to a batch size, or
what arrives within a short linger) and handles the batch with one describe, one create, one
create-partitions and one alter-configs call, then one more describe of the topics it changed.
A full queue makes callers wait (backpressure) instead of failing or exiting.

Two lanes, each with its own loop: changes users make (events) and the periodic resync. A resync
pass over thousands of topics takes seconds of admin calls; a `kubectl apply` must not wait
behind it. The lanes may touch the same topic at once, so every step tolerates a race (a topic
that already exists when created counts as created).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field

from tenacity import AsyncRetrying, retry_if_result, stop_after_delay, wait_exponential

from rillet import metrics
from rillet.kafka.admin import KafkaFailure, KafkaUnavailableError, TopicAdmin
from rillet.reconcile import topics
from rillet.reconcile.topics import DesiredTopic, ObservedTopic, Problem, SyncOutcome

log = logging.getLogger(__name__)

# How long a batch waits for brokers to show the changes it made (usually milliseconds).
CATCH_UP_SECONDS = 2.0


@dataclass
class _Request:
    desired: DesiredTopic
    outcome: asyncio.Future[SyncOutcome] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


def _refused(action: str, name: str, failure: KafkaFailure) -> Problem:
    return Problem(failure.reason, f"Kafka refused to {action} topic {name}: {failure.message}")


class TopicSyncer:
    """Queues topic reconciles and runs them in batches."""

    def __init__(
        self, admin: TopicAdmin, *, max_batch: int = 500, linger: float = 0.05, queue_size: int
    ) -> None:
        self._admin = admin
        self._max_batch = max_batch
        self._linger = linger
        self._events: asyncio.Queue[_Request] = asyncio.Queue(maxsize=queue_size)
        self._resyncs: asyncio.Queue[_Request] = asyncio.Queue(maxsize=queue_size)
        # The newest declaration each topic got through the event lane, and a lock per topic
        # so the two lanes never change one topic at the same time.
        self._newest: dict[str, tuple[str, int]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def sync(self, desired: DesiredTopic, *, resync: bool = False) -> SyncOutcome:
        """Bring one topic in line (in the next batch of its lane) and report what happened."""
        queue = self._resyncs if resync else self._events
        if not resync and desired.source is not None:
            self._newest[desired.name] = desired.source
        request = _Request(desired)
        await queue.put(request)
        metrics.QUEUE_DEPTH.set(self._events.qsize() + self._resyncs.qsize())
        return await request.outcome

    async def run(self) -> None:
        """Serve both lanes until cancelled."""
        await asyncio.gather(self._serve(self._events), self._serve(self._resyncs))

    async def _serve(self, queue: asyncio.Queue[_Request]) -> None:
        while True:
            batch = await self._next_batch(queue)
            metrics.QUEUE_DEPTH.set(self._events.qsize() + self._resyncs.qsize())
            try:
                outcomes = await self._handle(batch)
            except Exception as error:
                log.exception("topic batch failed")
                outcomes = {
                    r.desired.name: SyncOutcome(problems=(Problem("InternalError", str(error)),))
                    for r in batch
                }
            for request in batch:
                if not request.outcome.done():
                    request.outcome.set_result(outcomes[request.desired.name])

    async def _next_batch(self, queue: asyncio.Queue[_Request]) -> list[_Request]:
        batch = [await queue.get()]
        deadline = asyncio.get_running_loop().time() + self._linger
        while len(batch) < self._max_batch:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0 and queue.empty():
                break
            try:
                batch.append(await asyncio.wait_for(queue.get(), max(remaining, 0)))
            except TimeoutError:
                break
        return batch

    async def _handle(self, batch: Sequence[_Request]) -> dict[str, SyncOutcome]:
        # Several requests for one topic in a batch: the newest declaration wins.
        desired = {r.desired.name: r.desired for r in batch}
        async with contextlib.AsyncExitStack() as held:
            for name in sorted(desired):  # one order for both lanes: no deadlock
                await held.enter_async_context(self._locks.setdefault(name, asyncio.Lock()))
            current = {
                name: topic
                for name, topic in desired.items()
                if not topic.superseded_by(self._newest.get(name))
            }
            outcomes = {name: SyncOutcome(superseded=True) for name in desired.keys() - current}
            with metrics.BATCH_SECONDS.time():
                try:
                    outcomes |= await self._reconcile(current) if current else {}
                except KafkaUnavailableError as error:
                    message = f"Kafka at the configured bootstrap servers is unreachable: {error}"
                    outcomes |= {name: SyncOutcome(unavailable=message) for name in current}
        return outcomes

    async def _reconcile(self, desired: dict[str, DesiredTopic]) -> dict[str, SyncOutcome]:
        observed = await self._admin.describe(desired)
        plans: dict[str, topics.TopicPlan] = {}
        problems: dict[str, list[Problem]] = {name: [] for name in desired}
        for name, found in observed.items():
            if isinstance(found, KafkaFailure):
                problems[name].append(_refused("describe", name, found))
                continue
            plans[name] = topics.plan(desired[name], found)
            problems[name] += plans[name].problems

        creates = [desired[n] for n, p in plans.items() if p.create]
        grows = {n: p.grow_to for n, p in plans.items() if p.grow_to is not None}
        alters = {n: p.config for n, p in plans.items() if p.config}
        failures: dict[str, list[tuple[str, KafkaFailure]]] = {}
        for action, results in (
            ("create", await self._admin.create(creates)),
            ("add partitions to", await self._admin.grow(grows)),
            ("change the config of", await self._admin.alter_configs(alters)),
        ):
            for name, failure in results.items():
                if failure is not None:
                    failures.setdefault(name, []).append((action, failure))

        changed = {n: desired[n] for n, p in plans.items() if p.changes}
        after = await self._observe(changed, expect=changed.keys() - failures.keys())
        outcomes = {}
        for name in desired:
            refused = [_refused(action, name, f) for action, f in failures.get(name, [])]
            final = after.get(name, observed.get(name))
            plan = plans.get(name)
            applied = tuple(topics.describe_changes(plan, desired[name])) if plan else ()
            if refused:
                applied = ()
            outcomes[name] = SyncOutcome(
                observed=final if isinstance(final, ObservedTopic) else None,
                applied=applied,
                problems=tuple(problems[name] + refused),
            )
        return outcomes

    async def _observe(
        self, desired: Mapping[str, DesiredTopic], *, expect: Set[str]
    ) -> dict[str, ObservedTopic | KafkaFailure | None]:
        """Describe topics a batch changed, again for a moment while Kafka lags behind.

        The controller commits a create, new partitions or a config change before every
        broker's metadata has it, so a describe right after can still miss it. Reporting that
        view would leave a new topic pending until the next resync; topics in `expect` (the
        changes Kafka accepted) are described until they show what was declared.
        """
        seen: dict[str, ObservedTopic | KafkaFailure | None] = {}

        def lagging(name: str) -> bool:
            found = seen.get(name)
            if isinstance(found, KafkaFailure):
                return False
            return name in expect and (found is None or topics.plan(desired[name], found).changes)

        async def caught_up() -> bool:
            seen.update(
                await self._admin.describe([n for n in desired if n not in seen or lagging(n)])
            )
            return not any(lagging(name) for name in desired)

        if desired:
            await AsyncRetrying(
                stop=stop_after_delay(CATCH_UP_SECONDS),
                wait=wait_exponential(multiplier=0.05, max=0.5),
                retry=retry_if_result(lambda done: not done),
                retry_error_callback=lambda _: False,
            )(caught_up)
        return seen

    async def delete(self, name: str) -> KafkaFailure | None:
        """Delete one topic now (deletions are rare: no batching)."""
        with contextlib.suppress(KeyError):
            return (await self._admin.delete([name]))[name]
        return None
