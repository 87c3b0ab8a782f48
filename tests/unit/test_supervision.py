"""A background loop of the operator that ends stops the operator; shutdown does not."""

from __future__ import annotations

import asyncio

from rillet.handlers.supervision import Supervisor


async def _crash() -> None:
    raise KeyError("t-1")


async def _forever() -> None:
    await asyncio.Event().wait()


async def _return() -> None:
    return None


def test_a_loop_that_crashes_stops_the_operator_and_names_itself() -> None:
    async def scenario() -> tuple[bool, str | None]:
        stop = asyncio.Event()
        supervisor = Supervisor(stop)
        supervisor.watch([asyncio.create_task(_crash(), name="rillet-topic-syncer")])
        await asyncio.wait_for(stop.wait(), timeout=5)
        return stop.is_set(), supervisor.failure

    stopped, failure = asyncio.run(scenario())
    assert stopped
    assert failure == "rillet-topic-syncer crashed: KeyError('t-1')"


def test_a_loop_that_returns_also_stops_the_operator() -> None:
    async def scenario() -> str | None:
        stop = asyncio.Event()
        supervisor = Supervisor(stop)
        supervisor.watch([asyncio.create_task(_return(), name="rillet-resync")])
        await asyncio.wait_for(stop.wait(), timeout=5)
        return supervisor.failure

    assert asyncio.run(scenario()) == "rillet-resync ended"


def test_loops_cancelled_at_shutdown_are_no_failure() -> None:
    async def scenario() -> tuple[bool, str | None]:
        stop = asyncio.Event()
        supervisor = Supervisor(stop)
        task = asyncio.create_task(_forever(), name="rillet-app-scaling")
        supervisor.watch([task])
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)  # done callbacks run on the next loop iteration
        return stop.is_set(), supervisor.failure

    assert asyncio.run(scenario()) == (False, None)
