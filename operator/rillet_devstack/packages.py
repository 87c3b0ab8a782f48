"""The Debian packages the worker node and the image builds need, installed when missing.

containerd, runc, the CNI plugins and the image tools have no Go-module or Maven form worth
building here: Debian ships them, and the machines run as root. Services the packages would
start (containerd's own unit) are held back by a temporary policy-rc.d: the stack starts its
own containerd with its own configuration.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

# Each package, by a file it installs: present files mean nothing to do.
NODE_PACKAGES = {
    "containerd": "/usr/bin/containerd",
    "runc": "/usr/sbin/runc",
    "containernetworking-plugins": "/usr/lib/cni/bridge",
    "buildah": "/usr/bin/buildah",
    "debootstrap": "/usr/sbin/debootstrap",
    "iptables": "/usr/sbin/iptables",
    "conntrack": "/usr/sbin/conntrack",
    "iproute2": "/usr/sbin/ip",
    "gcc": "/usr/bin/gcc",  # the pause image is a static C program
    "libc6-dev": "/usr/lib/x86_64-linux-gnu/libc.a",
}
POLICY_RC = Path("/usr/sbin/policy-rc.d")


class PackagesUnavailableError(RuntimeError):
    """The packages are missing and cannot be installed here; the message says which."""


def missing_packages(packages: dict[str, str] = NODE_PACKAGES) -> list[str]:
    """The packages none of whose marker files exist."""
    return [name for name, marker in packages.items() if not Path(marker).exists()]


def ensure_installed(packages: list[str], *, log: Path) -> None:
    """apt-get install these packages (root only), without starting their services."""
    if not packages:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise PackagesUnavailableError(
            f"the worker node needs the Debian packages {' '.join(packages)}: install them "
            "(as root) or start the stack with --no-node"
        )
    log.parent.mkdir(parents=True, exist_ok=True)
    had_policy = POLICY_RC.exists()
    if not had_policy:
        POLICY_RC.write_text("#!/bin/sh\nexit 101\n")
        POLICY_RC.chmod(0o755)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        with log.open("ab") as out:
            for command in (
                ["apt-get", "update"],
                ["apt-get", "install", "-y", "--no-install-recommends", *packages],
            ):
                result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env)
                if result.returncode != 0:
                    raise PackagesUnavailableError(
                        f"`{' '.join(command)}` exited {result.returncode}; see {log}"
                    )
    finally:
        if not had_policy:
            POLICY_RC.unlink(missing_ok=True)
