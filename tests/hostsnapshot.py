"""The host as `rillet dev down` must leave it: a snapshot taken before `up`, one after `down`,
and what differs between them.

`devstack.leftovers` checks the cleanup against its own lists (the chains, links, paths and
sysctls it knows it touched); this checks it against the kernel. A snapshot holds the processes,
the mounts (/proc/self/mountinfo), the network links (`ip -o link`), the named network
namespaces (`ip netns list`, /run/netns) and those processes are in, the iptables rules of every
table (`*tables-save`, v4 and v6, nft and legacy: counters dropped) and the writable sysctls
under net.* plus those the node's parts set (node.SYSCTLS). After `down`, anything there that
was not before is left behind, and so is a sysctl whose value changed.

Processes need judging, as the machine is shared with whatever else runs on it. A process is
the stack's leftover when it is new (its pid and start time were not in the first snapshot),
still there after a grace period (`left_behind_since` polls until nothing is left, so the
short-lived ones go), and the run's doing: in a session of one of the stack's processes (each
leads one), naming the stack's directories, in the run's own cgroup (which everything it starts
inherits: when no other process was in it before the run), or in namespaces other than the
run's (a container's). Never the run's own processes (pytest, its xdist workers, the commands
this module runs), nor those a test started (they carry a test session's marker;
`session_leftovers` reports them).

The parsing (tests/hostparsing.py) and the comparison (`left_behind`) are pure and unit-tested
(tests/unit/test_hostsnapshot.py); `take` reads the host.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rillet_devstack import hostcleanup, noderunning, paths
from rillet_devstack import stack as devstack
from tests import hostparsing
from tests.integration import isolation

# Every process a test starts inherits it (with the test session's id).
TEST_MARKER = f"{isolation.SESSION_ENV}=".encode()
_NAMESPACES = ("net", "mnt", "pid")
_SAVERS = ("iptables-save", "ip6tables-save", "iptables-legacy-save", "ip6tables-legacy-save")
_BUILTIN_CHAINS = {"INPUT", "OUTPUT", "FORWARD", "PREROUTING", "POSTROUTING"}


@dataclass(frozen=True)
class Process:
    """One process, as /proc shows it."""

    pid: int
    ppid: int
    session: int
    started: int  # clock ticks after boot: with the pid, what tells a process from a later one
    command: str
    kernel: bool = False
    zombie: bool = False
    marked: bool = False  # carries a test session's marker in its environment
    cgroup: str = ""
    namespaces: tuple[str, ...] = ()  # net, mnt, pid: `net:[4026531833]` ...


@dataclass(frozen=True)
class Snapshot:
    """What the host runs, mounts and routes, and how its kernel is set, at one moment."""

    reader: int  # the pid that took it: the run's own process
    processes: tuple[Process, ...] = ()
    mounts: tuple[str, ...] = ()
    links: frozenset[str] = frozenset()
    netns: frozenset[str] = frozenset()  # named ones: `ip netns list` and /run/netns
    rules: tuple[str, ...] = ()  # `<family> <table>: <line>`
    sysctls: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StackScope:
    """What marks a process as the stack's: the sessions its processes lead, the directories
    its command lines name (its state: sockets and data; its cache: binaries and jars)."""

    sessions: frozenset[int]
    state_dir: str
    cache_dir: str

    @classmethod
    def of(cls, state: devstack.StackState) -> StackScope:
        return cls(
            sessions=frozenset(record.pid for record in state.processes),
            state_dir=str(state.kubeconfig.parent),  # the kubeconfig is at the state's root
            cache_dir=str(paths.cache_dir()),
        )


# -- Comparing (pure) ------------------------------------------------------------------------


def left_behind(before: Snapshot, after: Snapshot, *, stack: StackScope) -> list[str]:
    """What `after` has that `before` had not (a changed sysctl too), one line each."""
    processes = _processes_left(before, after, stack)
    return [
        *[f"process {p.pid} (parent {p.ppid}): {p.command[:200]}" for p in processes],
        *[f"mount {m}" for m in _added(before.mounts, after.mounts)],
        *[f"link {name}" for name in sorted(after.links - before.links)],
        *[f"network namespace {name}" for name in sorted(after.netns - before.netns)],
        *_namespaces_held(before, after, stack),
        *_added(_rules(before), _rules(after)),
        *_policies_changed(before, after),
        *[
            f"sysctl {name}={after.sysctls[name]} (was {value})"
            for name, value in sorted(before.sysctls.items())
            if name in after.sysctls and after.sysctls[name] != value
        ],
    ]


def _added(before: Iterable[str], after: Iterable[str]) -> list[str]:
    # Multisets: a rule appended twice, or a path mounted twice, leaves one behind.
    return sorted((collections.Counter(after) - collections.Counter(before)).elements())


def _processes_left(before: Snapshot, after: Snapshot, stack: StackScope) -> list[Process]:
    known = {(p.pid, p.started) for p in before.processes}
    cgroup = _the_runs_own_cgroup(before)
    return [
        p
        for p in _considered(after, stack)
        if (p.pid, p.started) not in known and _the_runs_doing(p, after, stack, cgroup)
    ]


def _the_runs_own_cgroup(before: Snapshot) -> str:
    """The run's cgroup, if the run had it to itself when `before` was taken (no process in it
    but the run and what started it); else "": a cgroup shared with something else on the
    machine (a CI agent's, a container's only one) tells nothing of whose a process is."""
    parents = {p.pid: p.ppid for p in before.processes}
    reader = next((p for p in before.processes if p.pid == before.reader), None)
    if reader is None or not reader.cgroup:
        return ""
    runs = _ancestors(reader.pid, parents) | {reader.pid}
    shared = any(p.cgroup == reader.cgroup and p.pid not in runs for p in before.processes)
    return "" if shared else reader.cgroup


def _considered(after: Snapshot, stack: StackScope) -> Iterator[Process]:
    """The live processes that are neither the kernel's, the run's own, nor a test's."""
    parents = {p.pid: p.ppid for p in after.processes}
    ancestors = _ancestors(after.reader, parents)
    for process in after.processes:
        if process.kernel or process.zombie or process.pid in ancestors:
            continue  # the last: what started pytest (make, a shell)
        stacks = process.session in stack.sessions
        if not stacks and after.reader in _ancestors(process.pid, parents) | {process.pid}:
            continue  # pytest, an xdist worker, a command of this module: the run itself
        # A test's: session_leftovers reports (and kills) those. Not a containerd shim, which
        # inherits containerd's environment and names its socket; a test's own Kafka names
        # the cache's jars, so only the state directory tells.
        if process.marked and not stacks and stack.state_dir not in process.command:
            continue
        yield process


def _ancestors(pid: int, parents: dict[int, int]) -> set[int]:
    found: set[int] = set()
    parent = parents.get(pid, 0)
    while parent and parent not in found:
        found.add(parent)
        parent = parents.get(parent, 0)
    return found


def _the_runs_doing(process: Process, after: Snapshot, stack: StackScope, cgroup: str) -> bool:
    """Whether the run (its stack, its pods) accounts for a process, rather than something else
    on a shared machine: by kernel facts, and the stack's session ids and directories."""
    reader = next((p for p in after.processes if p.pid == after.reader), None)
    # The run's namespaces (the host's: pid 1's may not be readable, as in a Firecracker VM's
    # init), and its cgroup when it is its own; unknown ones (empty) tell nothing.
    namespaces = reader.namespaces if reader and all(reader.namespaces) else ()
    return (
        process.session in stack.sessions
        or stack.state_dir in process.command
        or stack.cache_dir in process.command
        or (bool(cgroup) and process.cgroup == cgroup)
        or (bool(namespaces) and all(process.namespaces) and process.namespaces != namespaces)
    )


def _namespaces_held(before: Snapshot, after: Snapshot, stack: StackScope) -> list[str]:
    """Network namespaces no process was in before, that a process (not the run's own nor a
    test's) is in now: a pod's sandbox still running, say."""
    known = {p.namespaces[0] for p in before.processes if p.namespaces}
    held: dict[str, Process] = {}
    for process in _considered(after, stack):
        if process.namespaces and process.namespaces[0] and process.namespaces[0] not in known:
            held.setdefault(process.namespaces[0], process)
    return [
        f"network namespace {name} (of process {p.pid}: {p.command[:120]})"
        for name, p in sorted(held.items())
    ]


def _rules(snapshot: Snapshot) -> list[str]:
    """The rules and user chains; built-in chains' policies are compared on their own."""
    return [rule for rule in snapshot.rules if _policy(rule) is None]


def _policy(rule: str) -> tuple[str, str] | None:
    """(`<family> <table> <chain>`, policy) of a built-in chain's line, else None."""
    where, _, line = rule.partition(": ")
    parts = line.split()
    if len(parts) == 2 and parts[0].startswith(":") and parts[0][1:] in _BUILTIN_CHAINS:
        return f"{where} {parts[0][1:]}", parts[1]
    return None


def _policies_changed(before: Snapshot, after: Snapshot) -> list[str]:
    # A built-in chain that appeared with ACCEPT (iptables-nft makes a table when first used)
    # lets through what no chain would: only a policy that differs is left behind.
    was = dict(p for rule in before.rules if (p := _policy(rule)))
    now = dict(p for rule in after.rules if (p := _policy(rule)))
    return [
        f"{chain} policy {policy} (was {was.get(chain, 'ACCEPT')})"
        for chain, policy in sorted(now.items())
        if policy != was.get(chain, "ACCEPT")
    ]


# -- Reading the host ------------------------------------------------------------------------


def take() -> Snapshot:
    """The host now, as seen from this process's namespaces."""
    return Snapshot(
        reader=os.getpid(),
        rules=read_rules(),  # before the processes: its commands have exited by then
        links=hostparsing.parse_links(_output("ip", "-o", "link", "show")),
        netns=read_netns(),
        mounts=hostparsing.parse_mountinfo(Path("/proc/self/mountinfo").read_text()),
        sysctls=read_sysctls(),
        processes=read_processes(),
    )


def _output(*command: str) -> str:
    if not shutil.which(command[0]):
        return ""
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    return done.stdout if done.returncode == 0 else ""


def read_processes() -> tuple[Process, ...]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (process := _read_process(entry)) is not None:
            found.append(process)
    return tuple(found)


def _read_process(base: Path) -> Process | None:
    try:
        ppid, session, kernel, zombie, started = hostparsing.parse_stat((base / "stat").read_text())
    except (OSError, ValueError, IndexError):
        return None  # gone meanwhile
    argv = _read_bytes(base / "cmdline").replace(b"\0", b" ").decode(errors="replace").strip()
    namespaces = []
    for kind in _NAMESPACES:
        try:
            namespaces.append(os.readlink(base / "ns" / kind))
        except OSError:
            namespaces.append("")
    return Process(
        pid=int(base.name),
        ppid=ppid,
        session=session,
        started=started,
        command=argv or f"[{_read_bytes(base / 'comm').decode(errors='replace').strip()}]",
        kernel=kernel,
        zombie=zombie,
        marked=any(v.startswith(TEST_MARKER) for v in _read_bytes(base / "environ").split(b"\0")),
        cgroup=_read_bytes(base / "cgroup").decode(errors="replace"),
        namespaces=tuple(namespaces),
    )


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def read_netns() -> frozenset[str]:
    listed = hostparsing.parse_netns_list(_output("ip", "netns", "list"))
    run = Path("/run/netns")
    present = frozenset(entry.name for entry in run.iterdir()) if run.is_dir() else frozenset()
    return listed | present


def read_rules() -> tuple[str, ...]:
    """Every table's rules, of each iptables variant here. Without `-t`: the tools then list
    the tables that exist, where naming one would load its module and so create it."""
    rules: list[str] = []
    for saver in _SAVERS:
        rules += hostparsing.parse_rules(saver.removesuffix("-save"), _output(saver))
    return tuple(rules)


def read_sysctls() -> dict[str, str]:
    """The writable settings under net.* (a read-only one, like a conntrack count, no one set)
    and those the node's parts set elsewhere (node.SYSCTLS), by dotted name."""
    values = dict(noderunning.read_sysctls())
    root = Path("/proc/sys")
    for directory, _, files in os.walk(root / "net"):
        for name in files:
            path = Path(directory) / name
            try:
                if not path.stat().st_mode & 0o200:
                    continue
                value = path.read_text()
            except OSError:  # write-only (route.flush) or unreadable (stable_secret unset)
                continue
            values[".".join(path.relative_to(root).parts)] = " ".join(value.split())
    return values


def left_behind_since(before: Snapshot, stack: StackScope, *, timeout: float = 60) -> list[str]:
    """What is left on the host since `before`, once what is still going away has gone (up to
    `timeout` s: a process just killed, a rule being deleted; or, on a shared machine, another
    session's image build, whose overlay mounts and RUN step last about a minute)."""
    found: list[str] = []

    def clean() -> bool:
        found[:] = left_behind(before, take(), stack=stack)
        return not found

    hostcleanup.wait_until(clean, timeout=timeout, interval=1.0)
    return found
