"""The logs of pods as the node tests read them: a container's log as it is now, a driver's
followed into a file while a roll replaces it (its log goes with its pod), and what a driver says
when SIGTERM asks it to stop at a batch boundary."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from rillet_devstack import tools

from .conftest import Kube

# What the driver logs when SIGTERM asks it to stop at a batch boundary (runtime/driver/driving.py).
GRACEFUL_STOP = "received SIGTERM: stopping at the end of the running batch"


@contextlib.contextmanager
def following(kube: Kube, namespace: str, pod: str, path: Path) -> Iterator[Path]:
    """The pod's log, followed into `path` until the pod goes (or the block ends): the log of a
    driver that a roll replaces is gone with its pod."""
    command = [str(tools.kubectl()), f"--kubeconfig={kube.kubeconfig}", "logs", "-f"]
    with path.open("wb") as out:
        follower = subprocess.Popen(
            [*command, "-n", namespace, pod], stdout=out, stderr=subprocess.STDOUT
        )
        try:
            yield path
        finally:
            follower.kill()
            follower.wait(timeout=30)


def pod_log(kube: Kube, namespace: str, pod: str) -> str:
    return kube.kubectl("logs", "-n", namespace, pod).stdout
