"""The Lease that elects the one operator replica that reconciles (rules: reconcile/leases.py).

Plain threads and the official client, not asyncio: a standby has no event loop yet, and the
leader renews from a thread of its own, so a busy event loop cannot cost it the lease. A leader
that cannot renew in time calls `on_lost`; the CLI then exits at once, as a Go controller does
(`leaderelection lost`), because another replica may take over a moment later.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from rillet.k8s import login
from rillet.reconcile import leases

log = logging.getLogger(__name__)


class LeaseElector:
    """Takes, keeps and releases the Lease `namespace/name` for `identity`."""

    def __init__(self, *, namespace: str, name: str, identity: str) -> None:
        login.load_config()
        self._api = client.CoordinationV1Api()
        self.namespace, self.name, self.identity = namespace, name, identity
        self._observation: leases.Observation | None = None
        self._stop = threading.Event()
        self._keeper: threading.Thread | None = None

    def _read(self) -> dict[str, Any] | None:
        try:
            lease = self._api.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=leases.REQUEST_TIMEOUT
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        # Plain JSON from here on: reconcile/leases.py reads the spec as the apiserver writes it.
        return client.ApiClient().sanitize_for_serialization(lease)  # type: ignore[no-untyped-call,no-any-return]

    def _write(self, lease: dict[str, Any] | None, spec: dict[str, Any]) -> None:
        """Create the lease, or replace it at the resourceVersion read (409 if it moved on)."""
        if lease is None:
            body = {"metadata": {"name": self.name}, "spec": spec}
            self._api.create_namespaced_lease(
                self.namespace,
                body,  # type: ignore[arg-type] # the client sends a dict as it is
                _request_timeout=leases.REQUEST_TIMEOUT,
            )
        else:
            body = {"metadata": lease["metadata"], "spec": spec}
            self._api.replace_namespaced_lease(
                self.name,
                self.namespace,
                body,  # type: ignore[arg-type] # the client sends a dict as it is
                _request_timeout=leases.REQUEST_TIMEOUT,
            )

    def try_take(self) -> bool:
        """One attempt to take or renew the lease; whether this replica holds it now."""
        lease = self._read()
        spec = lease.get("spec") if lease else None
        now = time.monotonic()
        record = leases.LeaseRecord.from_spec(spec)
        self._observation = leases.observe(self._observation, record, now)
        if not leases.may_take(self._observation, self.identity, now):
            return False
        try:
            self._write(lease, leases.claimed_spec(spec, self.identity, datetime.now(UTC)))
        except ApiException as error:
            if error.status in (409, 422):  # another replica wrote first: read again next time
                return False
            raise
        return True

    def acquire(self) -> None:
        """Block until this replica holds the lease (a standby waits here)."""
        holder: str | None = None
        while not self.try_take_quietly():
            seen = self._observation.record.holder if self._observation else None
            if seen != holder:
                holder = seen
                log.info("standing by: lease %s/%s held by %s", self.namespace, self.name, holder)
            time.sleep(leases.RETRY_SECONDS)  # the standby's pace: one read a second
        log.info("leading: took lease %s/%s as %s", self.namespace, self.name, self.identity)

    def try_take_quietly(self) -> bool:
        """`try_take`, with an unreachable apiserver counted as not taken (a standby retries)."""
        try:
            return self.try_take()
        except Exception as error:  # any failure means: not leading (yet)
            log.warning("lease %s/%s: %s", self.namespace, self.name, error)
            return False

    def keep(self, on_lost: Callable[[str], None]) -> None:
        """Renew from a thread until `release`; `on_lost` if a renewal misses the deadline."""

        def renew() -> None:
            # From the start of the last renewal that succeeded: the standbys' clocks run from a
            # moment after it, so a leader that gives up by this clock is gone before they act.
            renewed = started = time.monotonic()
            # Each wait ends at a moment fixed before it: a process frozen (SIGSTOP, a paused VM)
            # anywhere in this loop, even as a renewal returns, checks its deadline the instant
            # it wakes. A wait of RETRY_SECONDS begun after the wake let a leader frozen past
            # its lease reconcile for one more second (seen: a freeze timed to a renewal, and a
            # change applied after the lease had expired and before the leader exited).
            while not self._stop.wait(max(0.0, started + leases.RETRY_SECONDS - time.monotonic())):
                started = time.monotonic()
                if started - renewed > leases.RENEW_DEADLINE_SECONDS:
                    on_lost(f"lease not renewed for {leases.RENEW_DEADLINE_SECONDS} s")
                    return
                if self.try_take_quietly():
                    renewed = started
                    continue
                held_by = self._observation.record.holder if self._observation else None
                if held_by not in (None, self.identity):
                    on_lost(f"lease taken by {held_by}")
                    return
                if time.monotonic() - renewed > leases.RENEW_DEADLINE_SECONDS:
                    on_lost(f"lease not renewed for {leases.RENEW_DEADLINE_SECONDS} s")
                    return

        self._keeper = threading.Thread(target=renew, name="lease-keeper", daemon=True)
        self._keeper.start()

    def release(self) -> None:
        """Stop renewing and free the lease, so a standby takes over without waiting it out."""
        self._stop.set()
        if self._keeper is not None:
            self._keeper.join()
        try:
            lease = self._read()
            spec = lease.get("spec") if lease else None
            if lease is not None and leases.LeaseRecord.from_spec(spec).holder == self.identity:
                self._write(lease, leases.released_spec(spec, datetime.now(UTC)))
                log.info("released lease %s/%s", self.namespace, self.name)
        except Exception as error:  # a standby then waits the lease out
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, error)
