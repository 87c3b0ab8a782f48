"""Reconciling a Table again at once when the App that writes it appears or changes.

A Table without spec.partitions takes the partition count of its writer App's inputs, which it
finds in the Apps index. Applied together with the App, the Table is often reconciled first,
before the App is indexed, and waits (WaitingForPartitions). Nothing about the Table changes
after that, so kopf calls none of its handlers again: it waited for the periodic resync (30 s).

So the App's handler nudges the Tables it writes. A nudge reconciles the Table in the operator,
with no write to the Table but its status (an annotation bumped for kopf to notice would be a
write to the user's object, an extra watch event for every Table, and drift a GitOps tool
shows):
- on the syncer's event lane, the one `kubectl apply` uses, never behind a resync;
- from the Table's latest body in kopf's index, once its own handler has settled it (status
  at its generation). kopf writes a handler's status without a precondition, so a nudge that
  ran beside the handler could have its result overwritten by the handler's older view;
- with the status written on a resourceVersion precondition; a conflict (the Table changed
  meanwhile) is tried again from the newer body.
A Table not settled within SETTLE_SECONDS is left to its handler and the resync.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final

import kopf

from rillet.handlers import indexes, reconciling, resyncing
from rillet.k8s import applying
from rillet.k8s.writing import ObjectWriter
from rillet.kafka.syncing import TopicSyncer
from rillet.reconcile import statuses

log = logging.getLogger(__name__)

SETTLE_SECONDS: Final = 10.0
POLL_SECONDS: Final = 0.1
ATTEMPTS: Final = 3

Key = tuple[str, str]  # namespace, name


class Nudger:
    """Reconciles objects of one kind (Tables) out of turn, one run per object at a time."""

    def __init__(
        self,
        *,
        plural: str,
        index: kopf.Index[Key, dict[str, Any]],
        build: resyncing.SubjectBuilder,
        views: indexes.Views,
        syncer: TopicSyncer,
        writer: ObjectWriter,
    ) -> None:
        self._plural, self._index, self._build = plural, index, build
        self._views, self._syncer, self._writer = views, syncer, writer
        self._running: dict[Key, asyncio.Task[None]] = {}
        self._again: set[Key] = set()

    def nudge(self, namespace: str, names: Iterable[str]) -> None:
        """Reconcile these objects soon (a nudge during a run of the same object runs once
        more after it, with what changed meanwhile)."""
        for name in names:
            key = (namespace, name)
            if key in self._running:
                self._again.add(key)
                continue
            task = asyncio.create_task(self._serve(key), name=f"rillet-nudge-{namespace}/{name}")
            self._running[key] = task

    async def stop(self) -> None:
        """Cancel the nudges under way."""
        for task in list(self._running.values()):
            task.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def _serve(self, key: Key) -> None:
        try:
            while True:
                try:
                    await self._reconcile(key)
                except Exception as error:  # the resync will try again; never crash a task
                    log.warning(
                        "nudged reconcile of %s %s/%s failed: %s",
                        self._plural,
                        *key,
                        applying.describe(error),
                    )
                if key not in self._again:
                    return
                self._again.discard(key)
        finally:
            self._running.pop(key, None)

    def _latest(self, key: Key) -> Mapping[str, Any] | None:
        return indexes.newest(list(self._index.get(key, [])))

    async def _settled(self, key: Key) -> Mapping[str, Any] | None:
        """The object's latest body once its own handler settled it; None if it did not."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_SECONDS
        while True:
            body = self._latest(key)
            if body is None or body["metadata"].get("deletionTimestamp"):
                return None
            if statuses.is_due(body):
                return body
            if loop.time() >= deadline:
                return None
            await asyncio.sleep(POLL_SECONDS)

    async def _reconcile(self, key: Key) -> None:
        for _ in range(ATTEMPTS):
            body = await self._settled(key)
            if body is None:
                return
            report = await reconciling.reconcile(self._build(body, self._views), self._syncer)
            if report is None:
                return  # a newer declaration was handled instead
            if report.status_patch:
                written = await self._writer.patch_status(
                    self._plural,
                    key[0],
                    key[1],
                    report.status_patch,
                    resource_version=body["metadata"].get("resourceVersion"),
                )
                if not written:
                    await asyncio.sleep(POLL_SECONDS)  # let the index catch up, then again
                    continue
            for note in report.notes:
                await self._writer.post_event(
                    dict(body), type_=note.type, reason=note.reason, message=note.message
                )
            return
