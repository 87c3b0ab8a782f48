"""Running the real operator (`rillet operator run`) as a process against the local stack.

The operator runs as it does in production: its own process, the stack's kubeconfig, settings
from RILLET_* variables. Tests, benchmarks and the demo give each operator a namespace pattern so
that operators started side by side never handle the same objects.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from rillet_devstack import driverroles, processes


@dataclass
class OperatorProcess:
    """One `rillet operator run` process."""

    kubeconfig: Path
    bootstrap: str
    namespace_pattern: str
    log: Path
    settings: dict[str, str] = field(default_factory=dict)
    resync_seconds: float = 3.0
    metrics_port: int = field(default_factory=processes.free_port)
    health_port: int = field(default_factory=processes.free_port)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "RILLET_KAFKA_BOOTSTRAP": self.bootstrap,
            "RILLET_RESYNC_SECONDS": str(self.resync_seconds),
            "RILLET_METRICS_PORT": str(self.metrics_port),
            "RILLET_HEALTH_PORT": str(self.health_port),
            # As the Helm chart's Deployment sets it (see charts/rillet/templates).
            "MALLOC_ARENA_MAX": "2",
            # The tests name each Kafka topic themselves (under their session's prefix) and
            # read it by that name; a test of the prefix sets it back.
            "RILLET_PREFIX_NAMESPACE": "false",
            # The tests see what Kafka itself refuses (2**31 - 1 partitions); the quota's own
            # test sets a cap.
            "RILLET_MAX_PARTITIONS_PER_TOPIC": str(2**31 - 1),
            **self.settings,
        }
        if "RILLET_APP_DRIVER_CLUSTER_ROLE" not in env:
            # Drivers are bound to the chart's driver ClusterRole: the stack's, applied here
            # as the chart renders it (a test of the chart's own release names its own).
            env["RILLET_APP_DRIVER_CLUSTER_ROLE"] = driverroles.ensure(self.kubeconfig)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "rillet.cli",
                    "operator",
                    "run",
                    "-n",
                    self.namespace_pattern,
                ],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def kill(self) -> None:
        """SIGKILL: no cleanup, no finalizer handling, like an OOM kill or a node loss."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def healthy(self, timeout: float = 10.0) -> bool:
        """Its health endpoint answers OK: the event loop runs, start-up finished, and none of
        its own loops ended (what the chart's probes ask of the pod)."""
        url = f"http://127.0.0.1:{self.health_port}/healthz"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, TimeoutError, ConnectionError):
            return False

    def dump_stacks(self) -> None:
        """Ask it to print every thread's stack into its log (SIGUSR1, see `rillet operator
        run`): where a stuck operator is stuck."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGUSR1)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid
