"""The chart's driver ClusterRole on the local stack, for operators run outside the chart.

An App's driver is bound to the ClusterRole the chart installs (templates/driverrole.yaml); an
operator run as a process (tests, benchmarks, the demo's second operator) has no chart, so this
renders that template (`helm template --show-only`: the chart stays its single source) as a
release of namespace DEV_NAMESPACE would, and applies it. One ClusterRole for every operator
of the stack, never deleted: sessions sharing the stack all bind the same one.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Final

from rillet_devstack import provisioning, tools

CHART: Final = Path(__file__).resolve().parents[2] / "charts" / "rillet"
TEMPLATE: Final = "templates/driverrole.yaml"
# No release of the stack's own (the demo's is rillet-system) is installed in this namespace.
DEV_NAMESPACE: Final = "rillet-dev"
# What the chart names it for DEV_NAMESPACE (rillet.driverClusterRole).
NAME: Final = f"{DEV_NAMESPACE}-rillet-operator-driver"


def render(release_namespace: str = DEV_NAMESPACE) -> str:
    """The chart's driver ClusterRole, as `helm install` into `release_namespace` makes it."""
    helm = provisioning.provision(provisioning.HELM) / "helm"
    return subprocess.run(
        [
            str(helm),
            *("template", "rillet", str(CHART), "--namespace", release_namespace),
            *("--show-only", TEMPLATE),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def ensure(kubeconfig: Path) -> str:
    """Apply the stack's driver ClusterRole (as the chart has it now); returns its name."""
    result = tools.run_kubectl(
        kubeconfig,
        [
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=rillet-devstack",
            "-f",
            "-",
        ],
        input=render(),
    )
    if result.returncode != 0:
        raise RuntimeError(f"applying ClusterRole {NAME} failed: {result.stderr.strip()}")
    return NAME
