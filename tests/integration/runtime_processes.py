"""Apps of the runtime tests run as `python -m rillet.cli run` subprocesses, as a driver pod runs
them: each in a process group of its own that `killed_at_exit` ends as a whole (Python and the
JVM it started), its threads' stacks dumped into its log when a test fails while it runs; and
`rillet` commands run captured. Every wait has a deadline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from rillet.cli import apps
from rillet_devstack import spark as devspark
from tests.integration.polling import wait_for


def cli_env() -> dict[str, str]:
    jars = ",".join(str(jar) for jar in devspark.spark_jars())
    return {**os.environ, apps.JARS_ENV: jars, "PYTHONUNBUFFERED": "1"}


@contextmanager
def killed_at_exit(
    process: subprocess.Popen[bytes], *, log: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """The process of a `cli_run` while inside; on the way out its whole process group (Python
    and the JVM it started) is SIGKILLed, whatever the test did: a hung driver, or one that
    was only sent SIGTERM, leaves nothing running into later tests. If the test failed while
    the driver still ran, its threads' stacks are first added to its `log`: where it hung."""
    try:
        yield process
    except BaseException as error:
        if log is not None and process.poll() is None:
            dump_stacks(process, log)
            error.add_note(f"the driver's Python and JVM thread stacks are at the end of {log}")
        raise
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def _group(pgid: int) -> list[int]:
    """The processes of a process group (from /proc)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError):  # gone meanwhile
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) == pgid:
                members.append(int(stat.parent.name))
    return members


def jvms(process: subprocess.Popen[bytes]) -> list[int]:
    """The JVMs of a `cli_run` driver's process group."""
    found = []
    for pid in _group(process.pid):
        with suppress(OSError):  # gone meanwhile
            if Path(f"/proc/{pid}/comm").read_text().strip() == "java":
                found.append(pid)
    return found


def maps(pid: int, path: Path) -> bool:
    """Whether the process has the file mapped into its memory."""
    return f" {path}\n" in Path(f"/proc/{pid}/maps").read_text()


def dump_stacks(process: subprocess.Popen[bytes], log: Path) -> None:
    """Have a `cli_run` driver print every thread's stack into its log: Python's (SIGUSR1,
    faulthandler) and its JVM's (SIGQUIT, the JVM's thread dump)."""
    with suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGUSR1)
    for pid in jvms(process):  # SIGQUIT would end anything but a JVM
        with suppress(OSError):
            os.kill(pid, signal.SIGQUIT)
    with suppress(AssertionError):  # a JVM too stuck to answer still leaves Python's stacks
        wait_for(
            lambda: "Full thread dump" in log.read_text(errors="replace"),
            timeout=10,
            what="the JVM's thread dump",
        )


def cli_run(manifest: Path, *args: str, log: Path) -> subprocess.Popen[bytes]:
    """`python -m rillet.cli run` in a session of its own (so its JVM can be killed with it:
    use it inside `killed_at_exit`)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "rillet.cli", "run", str(manifest), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=cli_env(),
            start_new_session=True,
        )


def start_driver(
    manifest: Path, bootstrap: str, workdir: Path, *extra: str, per_batch: int
) -> subprocess.Popen[bytes]:
    """`rillet run` of the manifest's App with its checkpoint and log in `workdir`, batches of
    at most `per_batch` records (use inside `killed_at_exit`)."""
    return cli_run(
        manifest,
        "-b",
        bootstrap,
        "--checkpoint-dir",
        str(workdir / "checkpoint"),
        "--max-offsets-per-trigger",
        str(per_batch),
        *extra,
        log=workdir / "driver.log",
    )


def run_driver_to_end(manifest: Path, bootstrap: str, workdir: Path, *, per_batch: int) -> None:
    """Restart the App's driver from its checkpoint in `workdir` with --available-now, and
    fail unless it gets through what its inputs hold and exits 0."""
    process = start_driver(manifest, bootstrap, workdir, "--available-now", per_batch=per_batch)
    with killed_at_exit(process, log=workdir / "driver.log") as driver:
        assert driver.wait(timeout=300) == 0, (workdir / "driver.log").read_text()[-3000:]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m rillet.cli ...`, captured."""
    return subprocess.run(
        [sys.executable, "-m", "rillet.cli", *args],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
        check=False,
    )
