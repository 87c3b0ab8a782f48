"""Taking the worker node off the machine without a trace: pods, shims, mounts, iptables chains,
bridges, sysctls and the fixed paths kubelet and containerd use.

The order matters (NODE.md): pods are deleted while kubelet and containerd still run, so CNI
teardown happens; then the node's processes stop; then whatever they left is swept. The parsing
helpers are pure and unit-tested; the rest runs commands.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path

# Chains the node's parts create: kubelet (KUBE-FIREWALL, KUBE-KUBELET-CANARY, ...), kube-proxy
# (KUBE-SERVICES, KUBE-SVC-*, ...), the CNI plugins (CNI-*) and the stack's NetworkPolicy
# steering (networkpolicies.CHAIN).
CHAIN_PREFIXES = ("KUBE-", "CNI-", "RILLET-")
TABLES = ("filter", "nat", "mangle", "raw")
IPTABLES = ("iptables", "ip6tables")


def chains_to_remove(rules: str) -> list[str]:
    """The node's chains in `iptables -S` output."""
    chains = []
    for line in rules.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "-N" and parts[1].startswith(CHAIN_PREFIXES):
            chains.append(parts[1])
    return chains


def jumps_to_remove(rules: str) -> list[list[str]]:
    """`-D` arguments for rules of other chains that refer to the node's chains, so those
    chains can be deleted."""
    deletions = []
    for line in rules.splitlines():
        parts = shlex.split(line)  # comments are quoted: "kubernetes forwarding rules"
        if len(parts) < 2 or parts[0] != "-A" or parts[1].startswith(CHAIN_PREFIXES):
            continue
        if any(p.startswith(CHAIN_PREFIXES) for p in parts[2:]):
            deletions.append(["-D", *parts[1:]])
    return deletions


def _iptables(command: str, table: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [command, "-w", "5", "-t", table, *args], capture_output=True, text=True, check=False
    )


def remaining_chains() -> list[str]:
    """`<command>/<table>/<chain>` of each chain of the node still in the kernel."""
    found = []
    for command in IPTABLES:
        if not shutil.which(command):
            continue
        for table in TABLES:
            rules = _iptables(command, table, "-S").stdout
            found += [f"{command}/{table}/{chain}" for chain in chains_to_remove(rules)]
    return found


def remove_chains() -> None:
    """Delete the node's iptables chains and the jumps into them, in every table."""
    for command in IPTABLES:
        if not shutil.which(command):
            continue
        for table in TABLES:
            rules = _iptables(command, table, "-S").stdout
            for deletion in jumps_to_remove(rules):
                _iptables(command, table, *deletion)
            chains = chains_to_remove(rules)
            for chain in chains:
                _iptables(command, table, "-F", chain)
            for chain in chains:
                _iptables(command, table, "-X", chain)


def mounts_under(mounts: str, roots: Iterable[Path]) -> list[str]:
    """Mount points (from /proc/self/mounts text) under any of `roots`, deepest first."""
    prefixes = [str(root).rstrip("/") for root in roots]
    found = []
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        # /proc/mounts escapes spaces and tabs in paths as octal.
        point = fields[1].encode().decode("unicode_escape")
        if any(point == p or point.startswith(p + "/") for p in prefixes):
            found.append(point)
    return sorted(set(found), key=lambda m: m.count("/"), reverse=True)


def node_mounts(roots: Iterable[Path]) -> list[str]:
    """The mounts still under the node's directories."""
    return mounts_under(Path("/proc/self/mounts").read_text(), roots)


def unmount_all(roots: Iterable[Path]) -> None:
    """Unmount everything under `roots` (lazily, deepest first)."""
    for _ in range(3):  # a bind mount can hide another below it
        points = node_mounts(roots)
        if not points:
            return
        for point in points:
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line contains `text` (containerd's shims name its socket)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline:
            pids.append(int(entry.name))
    return pids


def kill_processes(pids: Iterable[int]) -> None:
    """SIGKILL these processes (shims left by a containerd that is gone)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def delete_link(name: str) -> None:
    """Delete a network link if it exists."""
    if Path(f"/sys/class/net/{name}").exists():
        subprocess.run(["ip", "link", "delete", name], capture_output=True, check=False)


def restore_sysctls(values: dict[str, str]) -> None:
    """Write back the values recorded before the node started."""
    for name, value in values.items():
        path = Path("/proc/sys") / name.replace(".", "/")
        if path.exists() and path.read_text().strip() != value:
            with contextlib.suppress(OSError):
                path.write_text(value)


def remove_paths(paths: Iterable[Path]) -> None:
    """Remove these files or directories (the node's, outside its state directory)."""
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def wait_until(check: Callable[[], bool], *, timeout: float, interval: float = 0.25) -> bool:
    """Poll `check` until it is true or `timeout` seconds pass; return its last answer."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
