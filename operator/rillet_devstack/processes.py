"""Starting, watching and stopping the stack's long-running processes.

Each process runs in its own session (so it outlives `rillet dev up` and can be signalled as a
group), writes to its own log, and is remembered by PID plus start time: a recycled PID is never
mistaken for a component of ours.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from rillet_devstack.commands import tail

# Children started by this Python process, kept so they are reaped (polled) rather than left as
# zombies or garbage-collected while running.
_children: dict[int, subprocess.Popen[bytes]] = {}
# The ports free_port handed out in this process.
_HANDED_OUT: set[int] = set()
_HANDED_OUT_LOCK = threading.Lock()


class ComponentFailedError(RuntimeError):
    """A component exited or never became ready; the message holds its log's tail."""


class ProcessRecord(BaseModel):
    """What identifies a started process across CLI invocations."""

    name: str
    pid: int
    start_ticks: int
    log: Path


def free_port() -> int:
    """A TCP port that nothing listens on right now, on any address, and that this process has
    not handed out before: the kernel gives a port released a moment ago out again, and one
    handed out may not be bound by its user yet (CI: a test's second operator got the health
    port of its first, stopped and about to start again, and died on EADDRINUSE)."""
    with _HANDED_OUT_LOCK:
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("0.0.0.0", 0))
                port: int = sock.getsockname()[1]
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces: split after its closing parenthesis.
    return raw[raw.rindex(")") + 2 :].split()


def _start_ticks(pid: int) -> int:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else -1


def is_alive(record: ProcessRecord) -> bool:
    """True while the recorded process (not a PID reuse, not a zombie) is running."""
    fields = _stat_fields(record.pid)
    if fields is None or fields[0] == "Z":
        _reap(record.pid)
        return False
    return int(fields[19]) == record.start_ticks


def _reap(pid: int) -> None:
    # Our own children linger as zombies until waited for.
    child = _children.get(pid)
    if child is not None and child.poll() is not None:
        del _children[pid]


def start(
    name: str,
    args: Sequence[str | Path],
    *,
    log: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ProcessRecord:
    """Start a long-running process in its own session, output appended to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(map(str, args))}\n".encode())
        out.flush()
        process = subprocess.Popen(
            [str(a) for a in args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=cwd,
            env={**os.environ, **(env or {})},
        )
    _children[process.pid] = process
    return ProcessRecord(name=name, pid=process.pid, start_ticks=_start_ticks(process.pid), log=log)


def stop(record: ProcessRecord, *, grace_seconds: float = 15.0) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after the grace period."""
    if not is_alive(record):
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while is_alive(record) and time.monotonic() < deadline:
        time.sleep(0.1)
    if is_alive(record):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(record.pid, signal.SIGKILL)
        while is_alive(record):
            time.sleep(0.05)
    # A process started by an earlier `rillet dev up` is init's child now: it lingers as a
    # zombie until init reaps it. Wait (briefly) for that, so nothing shows in `ps` afterwards.
    deadline = time.monotonic() + 5
    while _start_ticks(record.pid) == record.start_ticks and time.monotonic() < deadline:
        time.sleep(0.05)


def wait_ready(
    record: ProcessRecord, probe: Callable[[], bool], *, timeout: float, what: str
) -> None:
    """Poll `probe` until it answers True; fail early with the log's tail if the process dies."""

    def check() -> bool:
        if not is_alive(record):
            raise ComponentFailedError(
                f"{record.name} exited before {what}; last lines of {record.log}:\n"
                f"{tail(record.log)}"
            )
        try:
            return probe()
        except Exception:
            return False

    retrying = Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_fixed(0.25),
        retry=retry_if_result(lambda ready: not ready),
        retry_error_callback=lambda _: False,
        reraise=True,
    )
    if not retrying(check):
        raise ComponentFailedError(
            f"{record.name} not {what} after {timeout:.0f}s; last lines of {record.log}:\n"
            f"{tail(record.log)}"
        )
