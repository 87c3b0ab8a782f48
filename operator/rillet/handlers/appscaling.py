"""The scaling loop: every running App's lag, driver and executors observed, its executors decided.

One operator-wide loop, like the resync, rather than a kopf timer per App: kopf puts a finalizer
on every object with a timer, and an App needs none (its objects go with it by owner
references). Every RILLET_APP_SCALE_SECONDS it takes the latest App bodies from kopf's index
and, for the settled ones (status at the current generation, not being deleted, not suspended):
- observes in one batch: the lag and partitions of every App's stream inputs (one Kafka round
  trip for all Apps, in a worker thread: `kafka.lag`), every App's driver and executor pods
  (one list request; one per namespace with Apps when the operator holds Roles, not a
  ClusterRole: `applying.app_pods_paths`), and the nodes not Ready (pods there are lost);
- decides each App's executor count (`reconcile.scaling.plan_executors`, with the App's
  recommendation history kept here, in memory, by uid), never above the cap the partitions set:
  a topic that grew raises the cap at the next pass;
- deletes at once the executor pods on lost nodes whose loss the status already shows
  (`apptargets.released_executors` says why);
- writes the status only when it changed, conditional on the resourceVersion it read (a newer
  App is its handler's), with an Event per scaling decision that changes the count and per
  change of standing;
- then, once the status holds it, writes the count onto the driver pod (the
  `rillet.io/executors-desired` annotation, `driverapi.desires`) when the pod says another.

The driver watches its own pod for that annotation and asks Spark for that many executors: it
needs no right on its App (`status.executors.desired` is what users read).
Apps that wait for Topics or Tables, or whose spec was refused, are reconciled again instead
(`appreconciling`): nothing about such an App changes when what it waits for appears.

This module does the I/O and keeps the history; which Apps to take, their targets and
observations are pure (`reconcile.apptargets`), as are the decision (`reconcile.scaling`) and
the Events (`reconcile.appnotes`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from rillet.handlers import appreconciling
from rillet.k8s import applying
from rillet.k8s.writing import ObjectWriter
from rillet.kafka.lag import LagReader, TopicLag
from rillet.reconcile import appstatus, apptargets, notes, scalingdecisions

log = logging.getLogger(__name__)

PLURAL: Final = "apps"
# An App whose spec was refused is tried again this rarely (a fix elsewhere, say a Table's
# valueSchema, may make it valid; trying every pass would only repeat the refusal).
REFUSED_RETRY_SECONDS: Final = 30.0


def _key(body: Mapping[str, Any]) -> tuple[str, str]:
    return str(body["metadata"]["namespace"]), str(body["metadata"]["name"])


class AppScaler:
    """Runs the scaling passes and keeps each App's recommendation history."""

    def __init__(
        self,
        *,
        deps: appreconciling.AppDeps,
        lag: LagReader,
        writer: ObjectWriter,
        clock: Any = time.monotonic,
    ) -> None:
        self._deps, self._lag, self._writer, self._clock = deps, lag, writer, clock
        self._history: dict[str, tuple[scalingdecisions.Recommendation, ...]] = {}
        self._refused_at: dict[str, float] = {}

    async def run_forever(self, interval: float) -> None:
        """A pass every `interval` seconds (after the previous one ends); until cancelled."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.run_once()
            except Exception:  # a bug here must not end the loop: the next pass tries again
                log.exception("an App scaling pass failed")

    def close(self) -> None:
        """Release the lag reader's Kafka clients (its consumers hold connections and threads);
        once the loop is cancelled."""
        self._lag.close()

    async def run_once(self) -> None:
        """One pass over every App."""
        bodies = self._deps.views.apps()
        scalable = [body for body in bodies if apptargets.is_scalable(body)]
        self._forget({str(body["metadata"]["uid"]) for body in scalable})
        jobs = [
            self._reconcile(body)
            for body in bodies
            if apptargets.needs_reconcile(body) and self._due(body)
        ]
        results = await asyncio.gather(*jobs, self._scale(scalable), return_exceptions=True)
        for failure in (r for r in results if isinstance(r, BaseException)):
            log.warning("App scaling pass: %s", applying.describe(failure))

    def _forget(self, uids: set[str]) -> None:
        """Drop the history of Apps gone or stopped: a resumed App starts afresh."""
        for uid in self._history.keys() - uids:
            del self._history[uid]

    def _due(self, body: Mapping[str, Any]) -> bool:
        if apptargets.standing_reason(body) != appstatus.INVALID_SPEC:
            return True
        uid, now = str(body["metadata"]["uid"]), self._clock()
        if now - self._refused_at.get(uid, float("-inf")) < REFUSED_RETRY_SECONDS:
            return False
        self._refused_at[uid] = now
        return True

    async def _reconcile(self, body: Mapping[str, Any]) -> None:
        report = await appreconciling.reconcile(body, self._deps)
        await self._write(body, report)

    async def _scale(self, bodies: Sequence[Mapping[str, Any]]) -> None:
        if not bodies:
            return
        targets = [apptargets.target_of(body, self._deps.views) for body in bodies]
        lags, pods, lost = await asyncio.gather(
            self._observe_lag(targets),
            self._deps.kube.app_pods({t.key[0] for t in targets}),
            appreconciling.lost_nodes(self._deps.kube),
            return_exceptions=True,
        )
        if isinstance(pods, BaseException):
            log.warning("listing App pods failed: %s", applying.describe(pods))
            return  # without the pods, the status would say the drivers are gone
        lag_of = lags if isinstance(lags, dict) else {}
        grouped = apptargets.group_pods(pods)
        lost_nodes = lost if isinstance(lost, frozenset) else frozenset()
        results = await asyncio.gather(
            *(self._scale_one(t, lag_of, grouped, lost_nodes) for t in targets),
            return_exceptions=True,
        )
        for target, result in zip(targets, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("scaling App %s/%s failed: %s", *target.key, applying.describe(result))

    async def _observe_lag(
        self, targets: Sequence[apptargets.Target]
    ) -> dict[tuple[str, str], TopicLag]:
        try:
            return await self._lag.observe(
                {t.group: [i.topic for i in t.inputs] for t in targets},
                from_start={(t.group, i.topic) for t in targets for i in t.inputs if i.from_start},
            )
        except Exception as error:  # Kafka down: lag and partitions unknown, the count holds
            log.warning("reading lag failed: %s", error)
            return {}

    async def _scale_one(
        self,
        target: apptargets.Target,
        lags: Mapping[tuple[str, str], TopicLag],
        pods: Mapping[apptargets.PodKey, list[Mapping[str, Any]]],
        lost_nodes: frozenset[str],
    ) -> None:
        uid = str(target.body["metadata"]["uid"])
        scaled = apptargets.derive_pass(
            target,
            lags,
            pods,
            history=self._history.get(uid, ()),
            now=self._clock(),
            at=datetime.now(UTC),
            lost_nodes=lost_nodes,
            max_executors_per_app=self._deps.env.max_executors_per_app,
        )
        self._history[uid] = scaled.history
        if not await self._write(target.body, scaled.report):
            return  # the next pass decides from the App as it is now
        if scaled.driver_patch is not None:
            pod, patch = scaled.driver_patch
            await self._deps.kube.patch_pod(target.key[0], pod, patch)
        if scaled.released:
            log.info(
                "App %s/%s: deleting executor pods on lost nodes: %s", *target.key, scaled.released
            )
            await self._deps.kube.force_delete_pods(target.key[0], scaled.released)

    async def _write(self, body: Mapping[str, Any], report: notes.Report) -> bool:
        """Write the status and post the Events; False when the App changed meanwhile."""
        meta = body["metadata"]
        if report.status_patch:
            written = await self._writer.patch_status(
                PLURAL,
                meta["namespace"],
                meta["name"],
                report.status_patch,
                resource_version=meta.get("resourceVersion"),
            )
            if not written:  # the App changed since this pass read it: the next pass sees it
                log.debug("App %s/%s changed meanwhile: status not written", *_key(body))
                return False
        for note in report.notes:
            await self._writer.post_event(
                dict(body), type_=note.type, reason=note.reason, message=note.message
            )
        return True
