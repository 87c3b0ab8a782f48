"""Client tools the stack provides, so nothing depends on what the machine has on PATH.

`kubectl` is the one built with the worker node's components (k8s.io/kubernetes/cmd/kubectl, the
stack's Kubernetes version), provisioned into the cache on first use like every artefact.

`run_kubectl` retries what a user would retry by hand: a request the apiserver never handled
(connection refused or reset, a TLS handshake or request timeout, the apiserver or etcd
briefly unavailable). Any other failure, such as an invalid object or a missing resource, is
returned at once.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tenacity import (
    Retrying,
    retry_if_result,
    stop_after_delay,
    wait_exponential,
)

from rillet_devstack import provisioning

# stderr of kubectl for requests that did not reach (or were not handled by) the apiserver.
TRANSIENT = re.compile(
    "|".join(
        (
            r"connection refused",
            r"connection reset by peer",
            r"Unable to connect to the server",
            r"TLS handshake timeout",
            r"i/o timeout",
            r"http2: client connection lost",
            r"the server is currently unable to handle the request",
            r"the server was unable to return a response in the time allotted",
            r"etcdserver: (request timed out|leader changed|too many requests)",
            r"\(ServiceUnavailable\)",
            r"\(Timeout\)",
            r"unexpected EOF",
        )
    )
)


def kubectl() -> Path:
    """The stack's kubectl (v<Kubernetes version>), built into the cache if missing."""
    return provisioning.provision(provisioning.KUBERNETES_NODE) / "kubectl"


def is_transient(result: subprocess.CompletedProcess[str]) -> bool:
    """Whether a failed kubectl call is one a user would simply run again."""
    return result.returncode != 0 and bool(TRANSIENT.search(result.stderr or ""))


def run_kubectl(
    kubeconfig: Path,
    args: Sequence[str],
    *,
    input: str | None = None,
    timeout: float = 120,
    retry_for: float = 30,
) -> subprocess.CompletedProcess[str]:
    """Run the stack's kubectl, retrying transient apiserver errors for up to `retry_for` s.

    Returns the last attempt's result, failed or not (the caller decides what a failure means).
    A call that outlives `timeout` raises subprocess.TimeoutExpired (kubectl is killed).
    """
    command = [str(kubectl()), f"--kubeconfig={kubeconfig}", *args]

    def attempt() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command, input=input, capture_output=True, text=True, check=False, timeout=timeout
        )

    retrying = Retrying(
        stop=stop_after_delay(retry_for),
        wait=wait_exponential(multiplier=0.25, max=4),
        retry=retry_if_result(is_transient),
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
    )
    result: subprocess.CompletedProcess[str] = retrying(attempt)
    return result
