"""Bringing topics in line with their declarations, many at a time.

Reconciles of single objects queue here; a loop takes what is queued (up to a batch size, or
what arrives within a short linger) and handles the batch with one describe, one create, one
create-partitions and one alter-configs call, then one more describe of the topics it changed.
Topics that describe does not show changed yet (broker metadata lags the controller) are
described again off the lane, and reported once they show it. A full queue makes callers wait
(backpressure) instead of failing or exiting.

Two lanes, each with its own loop and its own TopicAdmin: changes users make (events) and the
periodic resync. A resync pass over thousands of topics takes seconds of admin calls; a `kubectl
apply` must not wait behind it. Separate loops are not enough for that. A broker serves one
connection's requests in turn: through one shared AdminClient, each of an apply's requests
waited for the resync's 500-topic request in flight (an apply landed in 0.5 to 2 s, against
0.1 to 0.5 s with a client per lane). And the admin's waits for Kafka's answers ran in asyncio's
default executor, behind the resync's status writes (1.9 to 7.4 s). Each TopicAdmin has its own
connection and its own waiting threads, so an apply queues behind nothing of the resync's. The
lanes may touch the same topic at once, so every step tolerates a race (a topic that already
exists when created counts as created).

One topic never fails its batch: each is checked and built on its own (`topicrequests`), and
whatever goes wrong for one (Kafka's refusal, the client's, a failure to plan it) is that
topic's problem in its outcome, while the others go ahead. Only an unreachable Kafka concerns
the whole batch.

Before a topic is created or changed, the claims recorded in Kafka say whether it is the
object's to change (`topicownership`, `claimstore`): read once per batch, and a new claim recorded
(and read back: another release may have recorded one a moment before) before the change.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from tenacity import AsyncRetrying, retry_if_result, stop_after_delay, wait_exponential

from rillet import metrics
from rillet.kafka.admin import TopicAdmin
from rillet.kafka.claimstore import ClaimStore
from rillet.kafka.errors import KafkaUnavailableError
from rillet.kafka.topicrequests import KafkaFailure
from rillet.reconcile import topicownership, topics
from rillet.reconcile.topics import DesiredTopic, ObservedTopic, Problem, SyncOutcome

log = logging.getLogger(__name__)

# How long a reconcile waits for brokers to show the changes it made (usually milliseconds;
# seconds on a broker busy creating or deleting thousands of partitions).
CATCH_UP_SECONDS = 5.0


@dataclass(frozen=True)
class _Lagging:
    """An outcome to report once brokers show the change it made (or after a short while)."""

    desired: DesiredTopic
    outcome: SyncOutcome
    merge: bool = False


@dataclass
class _Request:
    desired: DesiredTopic
    outcome: asyncio.Future[SyncOutcome] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


def _lags(
    desired: DesiredTopic, found: ObservedTopic | KafkaFailure | None, *, merge: bool
) -> bool:
    """Whether a describe still misses a change Kafka accepted (its metadata lags behind)."""
    if isinstance(found, KafkaFailure):
        return False
    return found is None or _plan(desired, found, merge=merge).changes


def refusal(action: str, name: str, failure: KafkaFailure) -> Problem:
    """The problem of a topic whose `action` was refused, by Kafka or by its client."""
    who = "the Kafka client cannot" if failure.client else "Kafka refused to"
    return Problem(failure.reason, f"{who} {action} topic {name}: {failure.message}")


def _plan(desired: DesiredTopic, found: ObservedTopic | None, *, merge: bool) -> topics.TopicPlan:
    """`topics.plan`, with a failure of its own as this topic's problem, not the batch's."""
    try:
        return topics.plan(desired, found, merge=merge)
    except Exception as error:  # a bug for this one topic must not fail the others
        log.exception("planning topic %s failed", desired.name)
        return topics.TopicPlan(
            problems=(Problem("InternalError", f"planning topic {desired.name} failed: {error}"),)
        )


class TopicSyncer:
    """Queues topic reconciles and runs them in batches; `close` closes its admins.

    `admin` serves the event lane and deletions, `resync_admin` the resync lane (None: `admin`
    serves both, and an apply may wait for the resync's requests in flight). `claims`: the
    claims recorded in Kafka (None: no ownership check, for tests of the batching alone).
    """

    def __init__(
        self,
        admin: TopicAdmin,
        *,
        resync_admin: TopicAdmin | None = None,
        max_batch: int = 500,
        linger: float = 0.05,
        queue_size: int,
        claims: ClaimStore | None = None,
    ) -> None:
        self._admin = admin
        self._claims = claims
        self._resync_admin = resync_admin or admin
        self._max_batch = max_batch
        self._linger = linger
        self._events: asyncio.Queue[_Request] = asyncio.Queue(maxsize=queue_size)
        self._resyncs: asyncio.Queue[_Request] = asyncio.Queue(maxsize=queue_size)
        # The newest declaration each topic got through the event lane, and a lock per topic
        # so the two lanes never change one topic at the same time.
        self._newest: dict[str, tuple[str, int]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._catching_up: set[asyncio.Task[None]] = set()
        # Topics deleted for an object (its uid): requests of that object still queued, say from a
        # resync pass that read it just before its deletion, would create the topic again.
        self._deleted: dict[str, str] = {}

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
        try:
            await asyncio.gather(
                self._serve(self._events, self._admin),
                self._serve(self._resyncs, self._resync_admin),
            )
        finally:
            for task in self._catching_up:
                task.cancel()

    def close(self) -> None:
        """Close the lanes' admins (after `run` was cancelled): no thread waits for Kafka on."""
        self._admin.close()
        if self._resync_admin is not self._admin:
            self._resync_admin.close()
        if self._claims is not None:
            self._claims.close()

    async def _serve(self, queue: asyncio.Queue[_Request], admin: TopicAdmin) -> None:
        while True:
            batch = await self._next_batch(queue)
            metrics.QUEUE_DEPTH.set(self._events.qsize() + self._resyncs.qsize())
            try:
                outcomes = await self._handle(batch, admin)
            except Exception as error:
                log.exception("topic batch failed")
                outcomes = {
                    r.desired.name: SyncOutcome(problems=(Problem("InternalError", str(error)),))
                    for r in batch
                }
            lagging = []
            for request in batch:
                outcome = outcomes[request.desired.name]
                if isinstance(outcome, _Lagging):
                    lagging.append((request, outcome))
                elif not request.outcome.done():
                    request.outcome.set_result(outcome)
            if lagging:
                # Off the lane: the next batch need not wait for brokers to catch up.
                task = asyncio.create_task(self._report_when_visible(lagging, admin))
                self._catching_up.add(task)
                task.add_done_callback(self._catching_up.discard)

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

    async def _handle(
        self, batch: Sequence[_Request], admin: TopicAdmin
    ) -> dict[str, SyncOutcome | _Lagging]:
        # Several requests for one topic in a batch: the newest declaration wins.
        desired = {r.desired.name: r.desired for r in batch}
        async with contextlib.AsyncExitStack() as held:
            for name in sorted(desired):  # one order for both lanes: no deadlock
                await held.enter_async_context(self._locks.setdefault(name, asyncio.Lock()))
            current = {
                name: topic
                for name, topic in desired.items()
                if not topic.superseded_by(self._newest.get(name)) and not self._deleted_for(topic)
            }
            outcomes: dict[str, SyncOutcome | _Lagging] = {
                name: SyncOutcome(superseded=True) for name in desired.keys() - current
            }
            with metrics.BATCH_SECONDS.time():
                try:
                    outcomes |= await self._reconcile(current, admin) if current else {}
                except KafkaUnavailableError as error:
                    message = f"Kafka at the configured bootstrap servers is unreachable: {error}"
                    outcomes |= {name: SyncOutcome(unavailable=message) for name in current}
        return outcomes

    async def _reconcile(
        self, desired: dict[str, DesiredTopic], admin: TopicAdmin
    ) -> dict[str, SyncOutcome | _Lagging]:
        observed = await admin.describe(desired)
        decisions = await self._own(desired, observed)
        merges = {name: decision.merge for name, decision in decisions.items()}
        plans: dict[str, topics.TopicPlan] = {}
        problems: dict[str, list[Problem]] = {name: [] for name in desired}
        for name, found in observed.items():
            if isinstance(found, KafkaFailure):
                problems[name].append(refusal("describe", name, found))
                continue
            decision = decisions.get(name)
            if decision is not None and decision.refusal is not None:
                problems[name].append(Problem(*decision.refusal))
                continue
            plans[name] = _plan(desired[name], found, merge=merges.get(name, False))
            problems[name] += plans[name].problems

        creates = [desired[n] for n, p in plans.items() if p.create]
        grows = {n: p.grow_to for n, p in plans.items() if p.grow_to is not None}
        alters = {n: p.config for n, p in plans.items() if p.config}
        failures: dict[str, list[tuple[str, KafkaFailure]]] = {}
        for action, results in (
            ("create", await admin.create(creates)),
            ("add partitions to", await admin.grow(grows)),
            ("change the config of", await admin.alter_configs(alters)),
        ):
            for name, failure in results.items():
                if failure is not None:
                    failures.setdefault(name, []).append((action, failure))

        changed = {n for n, p in plans.items() if p.changes}
        after = await admin.describe(changed) if changed else {}
        outcomes: dict[str, SyncOutcome | _Lagging] = {}
        for name in desired:
            refused = [refusal(action, name, f) for action, f in failures.get(name, [])]
            final = after.get(name, observed.get(name))
            plan = plans.get(name)
            applied = tuple(topics.describe_changes(plan, desired[name])) if plan else ()
            if refused:
                applied = ()
            outcome = SyncOutcome(
                # A topic not the object's to change: what it holds is not the object's to see.
                observed=final if isinstance(final, ObservedTopic) and plan is not None else None,
                applied=applied,
                problems=tuple(problems[name] + refused),
            )
            accepted = name in changed and name not in failures
            merge = merges.get(name, False)
            if accepted and _lags(desired[name], after.get(name), merge=merge):
                outcomes[name] = _Lagging(desired[name], outcome, merge)
            else:
                outcomes[name] = outcome
        return outcomes

    async def _report_when_visible(
        self, lagging: Sequence[tuple[_Request, _Lagging]], admin: TopicAdmin
    ) -> None:
        """Describe topics a batch changed until they show the change, then report them.

        The controller commits a create, new partitions or a config change before every
        broker's metadata has it, so the describe right after can still miss it. Reporting that
        view would leave a new topic pending until the next resync. After CATCH_UP_SECONDS the
        last view is reported as lagging (TopicPending, not Ready: Kafka does not show the
        change yet), and the resync picks the topic up later.
        """
        waiting = {request.desired.name: lag for request, lag in lagging}
        seen: dict[str, ObservedTopic | KafkaFailure | None] = {}

        async def caught_up() -> bool:
            stale = [
                name
                for name, lag in waiting.items()
                if _lags(lag.desired, seen.get(name), merge=lag.merge)
            ]
            seen.update(await admin.describe(stale))
            return not any(
                _lags(lag.desired, seen.get(name), merge=lag.merge) for name, lag in waiting.items()
            )

        try:
            await AsyncRetrying(
                stop=stop_after_delay(CATCH_UP_SECONDS),
                wait=wait_exponential(multiplier=0.05, max=0.5),
                retry=retry_if_result(lambda done: not done),
                retry_error_callback=lambda _: False,
            )(caught_up)
        except KafkaUnavailableError:
            log.warning("Kafka unreachable while waiting for %d new topics to show", len(waiting))
        finally:
            for request, lag in lagging:
                found = seen.get(request.desired.name)
                outcome = lag.outcome
                if isinstance(found, ObservedTopic):
                    outcome = dataclasses.replace(outcome, observed=found)
                if _lags(lag.desired, found, merge=lag.merge):
                    outcome = dataclasses.replace(outcome, lagging=True)
                if not request.outcome.done():
                    request.outcome.set_result(outcome)

    async def _own(
        self,
        desired: dict[str, DesiredTopic],
        observed: dict[str, ObservedTopic | KafkaFailure | None],
    ) -> dict[str, topicownership.Decision]:
        """Whether each topic is its object's to create or change, its claim recorded first."""
        wished = {
            name: topic.wish
            for name, topic in desired.items()
            if topic.wish is not None and not isinstance(observed.get(name), KafkaFailure)
        }
        if self._claims is None or not wished:
            return {}
        claims = self._claims

        def decide(name: str, wish: topicownership.Wish) -> topicownership.Decision:
            found = observed.get(name)
            topic_id = found.topic_id if isinstance(found, ObservedTopic) else None
            return topicownership.decide(
                wish, found=claims.get(name), topic_id=topic_id, kafka_name=name
            )

        try:
            await claims.refresh()
        except KafkaUnavailableError:
            # The claims partition is leaderless while a lost broker's leadership moves: topics
            # whose claims this operator already holds keep being synced from the view it has
            # (a claim changes hands only by an adopting object); a new claim waits for Kafka.
            decisions = {name: decide(name, wish) for name, wish in wished.items()}
            if any(d.refusal is not None or d.record is not None for d in decisions.values()):
                raise
            log.warning("Claims topic unreadable; %d topics kept on their claims", len(decisions))
            return decisions
        decisions = {name: decide(name, wish) for name, wish in wished.items()}
        new = {n: d.record for n, d in decisions.items() if d.refusal is None and d.record}
        await claims.record(new)
        for name in new:
            if claims.get(name) != new[name]:  # another release recorded its claim meanwhile
                decisions[name] = decide(name, wished[name])
        return decisions

    async def deletion_refusal(
        self, claim: topicownership.ClaimRecord, kafka_name: str
    ) -> str | None:
        """Why deleting `claim`'s object must keep its topic: it is not the object's."""
        if self._claims is None:
            return None
        await self._claims.refresh()
        found = self._claims.get(kafka_name)
        return topicownership.deletion_refusal(claim, found=found, kafka_name=kafka_name)

    def _deleted_for(self, topic: DesiredTopic) -> bool:
        return topic.source is not None and self._deleted.get(topic.name) == topic.source[0]

    async def delete(self, name: str, *, owner: str) -> KafkaFailure | None:
        """Delete one topic for the object `owner` (its uid) now; deletions are rare: no batch.

        Waits for a batch changing the topic to finish first; afterwards, requests of the same
        object are dropped as superseded (a new object of the same name has another uid).
        """
        async with self._locks.setdefault(name, asyncio.Lock()):
            self._deleted[name] = owner
            failure = None
            with contextlib.suppress(KeyError):
                failure = (await self._admin.delete([name]))[name]
            if failure is None and self._claims is not None:
                await self._claims.record({name: None})  # released: gone with its topic
            return failure
