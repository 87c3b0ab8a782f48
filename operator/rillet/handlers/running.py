"""Running the operator: wait for the CRDs, win the Lease (with leader election), then kopf.

Before kopf starts, a replica stands by: it waits until the apiserver serves Rillet's kinds
(k8s/serving.py says why kopf alone can miss CRDs created after it started), then, with leader
election on, until it holds the Lease. Meanwhile its health endpoint answers, so the Deployment
neither restarts a standby nor holds back a rollout for it, and its metrics are served, with
`rillet_leader` 0 (a standby is a scrape target that is up, not one that is down). Once
leading it runs kopf, renewing the Lease from a thread; a clean stop releases it, so a standby
takes over within a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType

import kopf
import prometheus_client

from rillet import metrics
from rillet.api.v1alpha1 import kinds, objects
from rillet.handlers.supervision import Supervisor
from rillet.k8s import serving
from rillet.k8s.leadership import LeaseElector
from rillet.settings import OperatorSettings

log = logging.getLogger(__name__)


def run(settings: OperatorSettings) -> str | None:
    """Run until stopped (SIGTERM, SIGINT); what stopped it, if not a signal."""
    elector = None
    # Until kopf handles SIGTERM itself (it replaces this handler as it starts), the signal
    # ends the process through `finally`: a replica that took the Lease an instant before the
    # signal releases it, rather than leave the standbys waiting for it to expire.
    signal.signal(signal.SIGTERM, _stop_before_kopf)
    if settings.metrics_port:  # a standby is scraped too: it says it stands by, not "down"
        prometheus_client.start_http_server(settings.metrics_port, addr="0.0.0.0")
    metrics.LEADING.set(0)
    try:
        with _standing_by(settings.health_port):
            plurals = [kind.kind_info.plural for kind in kinds.ALL]
            serving.wait_until_served(objects.GROUP, objects.VERSION, plurals)
            if settings.leader_election:
                elector = LeaseElector(
                    namespace=settings.lease_home,
                    name=settings.lease_name,
                    identity=settings.pod_name,
                )
                elector.acquire()
        if elector is not None:
            elector.keep(on_lost=_exit_at_once)
        metrics.LEADING.set(1)
        stop = asyncio.Event()
        supervisor = Supervisor(stop)
        health = f"http://0.0.0.0:{settings.health_port}/healthz" if settings.health_port else None
        asyncio.run(
            kopf.operator(
                standalone=True,  # one replica reconciles: the Lease decides which, not peering
                clusterwide=not settings.namespaces,
                namespaces=settings.namespaces,
                liveness_endpoint=health,
                stop_flag=stop,
                memo=kopf.Memo(operator=settings, supervisor=supervisor),
            )
        )
    finally:
        if elector is not None:
            elector.release()  # after kopf stopped: the next leader never overlaps this one
    return supervisor.failure


def _stop_before_kopf(signum: int, frame: FrameType | None) -> None:
    log.info("received %s before the operator started: stopping", signal.Signals(signum).name)
    raise SystemExit(0)


def _exit_at_once(reason: str) -> None:
    # Another replica may take the lease as soon as it expires: stop writing now, not after a
    # graceful shutdown that could outlast it. The Deployment restarts this pod as a standby.
    log.critical("lost the leadership (%s): exiting", reason)
    logging.shutdown()
    os._exit(1)


class _StandbyHealth(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"standby": True}).encode()
        self.send_response(200 if self.path == "/healthz" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Probes every few seconds would drown the log."""


@contextlib.contextmanager
def _standing_by(port: int) -> Iterator[None]:
    """Answer the health probe while waiting; free the port for kopf's own endpoint after."""
    if not port:
        yield
        return
    server = ThreadingHTTPServer(("0.0.0.0", port), _StandbyHealth)
    thread = threading.Thread(target=server.serve_forever, name="standby-health", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
