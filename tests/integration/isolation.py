"""What a test session owns on the shared stack, and finding what it left behind.

Every name a test makes starts with the session's prefix, `t-<session>-`: its namespaces
(`t-<session>-<id>`, or `t-<session>-op-<id>` for those the session's operator watches) and its
Kafka topics (`t-<session>-<id>...`, the test's `kafka_prefix`). Two sessions on one stack (two
engineers, or `make test-repeat`) never touch each other's objects, and at the end of a session
everything under its prefix must be gone.

Every process a test starts inherits RILLET_TEST_SESSION=<session> in its environment, so one
left running (an operator, a driver's JVM) is found by reading /proc at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SESSION = uuid.uuid4().hex[:6]
SESSION_ENV = "RILLET_TEST_SESSION"
PREFIX = f"t-{SESSION}-"
OPERATED = f"{PREFIX}op-"
# Any session's prefix: names of another session running on the same stack are its business.
ANY_SESSION = re.compile(r"^t-[0-9a-f]{6}-")


# Each session records when it ran, so a session can tell whether another one shared the stack
# with it (names made by hand, outside any prefix, could then be either's).
SESSIONS = Path(tempfile.gettempdir()) / "rillet-test-sessions"


def register(started: float) -> None:
    SESSIONS.mkdir(exist_ok=True)
    record = {"pid": os.getpid(), "started": started, "ended": None}
    (SESSIONS / f"{SESSION}.json").write_text(json.dumps(record))
    for old in SESSIONS.glob("*.json"):  # a day is long enough to tell
        if old.stat().st_mtime < time.time() - 86_400:
            old.unlink(missing_ok=True)


def unregister() -> None:
    path = SESSIONS / f"{SESSION}.json"
    with contextlib.suppress(OSError, ValueError):
        record = json.loads(path.read_text())
        path.write_text(json.dumps({**record, "ended": time.time()}))


def overlapping(started: float) -> list[str]:
    """Other test sessions that ran on this machine at some time since `started`."""
    found = []
    for path in SESSIONS.glob("*.json"):
        if path.stem == SESSION:
            continue
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(path.read_text())
            alive = Path(f"/proc/{record['pid']}").exists()
            ended = record["ended"] or (None if alive else path.stat().st_mtime)
            if ended is None or ended > started:
                found.append(path.stem)
    return sorted(found)


def new_id() -> str:
    return uuid.uuid4().hex[:6]


def stack_owned_topic(name: str) -> bool:
    """Kafka's internal topics (__consumer_offsets, __transaction_state, ...)."""
    return name.startswith("__")


# How tests name namespaces: t-<hex>..., now always t-<session>-... (a namespace a person makes
# by hand on the shared stack, say t-manual-podrun, is not a test's).
TEST_NAMESPACE = re.compile(r"^t-[0-9a-f]{6,}(-|$)")


def foreign(name: str) -> bool:
    """A name under another session's prefix."""
    return bool(ANY_SESSION.match(name)) and not name.startswith(PREFIX)


def is_test_namespace(name: str) -> bool:
    """A namespace named the way tests name theirs (this session's or a stray one), not another
    session's."""
    return bool(TEST_NAMESPACE.match(name)) and not foreign(name)


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    session: int
    command: str


def _read(pid: int) -> tuple[bytes, str, str] | None:
    base = Path(f"/proc/{pid}")
    try:
        environ = (base / "environ").read_bytes()
        stat = (base / "stat").read_text()
        command = (base / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    return environ, stat, command


def session_processes(exclude_sessions: Iterable[int] = ()) -> list[Process]:
    """Live processes started (directly or not) by this test session, pytest itself excluded."""
    marker = f"{SESSION_ENV}={SESSION}".encode()
    skipped = set(exclude_sessions)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        read = _read(int(entry.name))
        if read is None or marker not in read[0].split(b"\0"):
            continue
        _, stat, command = read
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z" or int(fields[3]) in skipped:
            continue
        found.append(Process(int(entry.name), int(fields[1]), int(fields[3]), command.strip()))
    return found


def without_descendants_of(processes: list[Process], roots: set[int]) -> list[Process]:
    """Leave out `roots` and everything below them (a process kept alive on purpose)."""
    parents = {p.pid: p.ppid for p in processes}

    def below_a_root(pid: int) -> bool:
        seen = set()
        while pid and pid not in seen:
            if pid in roots:
                return True
            seen.add(pid)
            pid = parents.get(pid) or _parent(pid)
        return False

    return [p for p in processes if not below_a_root(p.pid)]


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def kill(processes: Iterable[Process]) -> None:
    """SIGKILL processes this session left (each is listed: children inherit the marker)."""
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)


def spark_gateway_pid() -> int | None:
    """The JVM of this process's SparkSession, if one was started (it lives as long as we do)."""
    if "pyspark" not in sys.modules:
        return None
    from pyspark import SparkContext

    gateway = getattr(SparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    pid = getattr(proc, "pid", None)
    return pid if isinstance(pid, int) else None
