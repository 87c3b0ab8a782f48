"""A `rillet run` process of the word-count App, timed from its spawn to its queries
reading and to its first committed batch: what the cold-start and idle benchmarks run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


class DriverClock:
    """A `rillet run` process of the word-count App, timed from its spawn: when its log says
    its queries read, and when its first batch is committed (a commits/N file appears in its
    checkpoint, N above those there before)."""

    def __init__(
        self,
        manifest: Path,
        bootstrap: str,
        checkpoint: Path,
        log: Path,
        environ: dict[str, str],
    ) -> None:
        from rillet.cli import apps
        from rillet_devstack import spark as devspark

        self.checkpoint = checkpoint
        self.committed_before = self.last_commit()
        jars = ",".join(str(jar) for jar in devspark.spark_jars())
        self.spawned = time.monotonic()
        self.log = log
        command = [sys.executable, "-m", "rillet.cli", "run", str(manifest), "-b", bootstrap]
        command += ["--checkpoint-dir", str(checkpoint), "--metrics-port", "0"]
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, apps.JARS_ENV: jars, **environ},
                start_new_session=True,
            )

    def last_commit(self) -> int:
        batches = [int(p.name) for p in self.checkpoint.glob("**/commits/*") if p.name.isdigit()]
        return max(batches, default=-1)

    def first_commit(self, timeout: float = 120, since: float | None = None) -> tuple[float, float]:
        """Seconds from spawn (or `since`) to the queries reading, and to the first batch
        committed above `committed_before` (the checkpoint's last at spawn, unless reset)."""
        reading = None
        start = self.spawned if since is None else since
        deadline = start + timeout
        while time.monotonic() < deadline:
            if reading is None and "metrics on http" in self.log.read_text(errors="replace"):
                reading = time.monotonic() - start
            if self.last_commit() > self.committed_before:
                done = time.monotonic() - start
                return reading if reading is not None else done, done
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"no batch committed: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        """SIGTERM, as the kubelet stops a driver: it ends at a batch boundary."""
        self.process.terminate()
        if self.process.wait(timeout=120) != 0:
            raise RuntimeError(f"the driver failed to stop: {self.log.read_text()[-3000:]}")

    def wait_for_log(self, text: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log.read_text(errors="replace"):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"no {text!r} in {self.log}: {self.log.read_text()[-3000:]}")
            time.sleep(0.1)

    def signal(self, signum: signal.Signals) -> None:
        """`signum` to the driver's process group: its Python and its JVM."""
        os.killpg(self.process.pid, signum)
