"""A command that prints as it goes (`rillet table get --watch`), read line by line, and
interrupted with Ctrl-C as at a terminal."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence


@contextlib.contextmanager
def watched(command: Sequence[str], env: Mapping[str, str]) -> Iterator[Iterator[str]]:
    """The command's output lines as they come; on leaving, SIGINT, and a failure unless it
    then exits 0."""
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**env, "PYTHONUNBUFFERED": "1"},
        # Ctrl-C as at a terminal: a run started in the background (nohup, `&`) inherits
        # SIGINT ignored, and Python then never turns it into KeyboardInterrupt.
        preexec_fn=_interruptible,
    ) as watching:
        try:
            yield lines_of(watching)
        finally:
            watching.send_signal(signal.SIGINT)
            try:
                _, errors = watching.communicate(timeout=30)  # reads the rest, closes the pipes
            except subprocess.TimeoutExpired:
                watching.kill()
                watching.communicate()
                raise AssertionError(f"{command[:4]} did not stop on SIGINT") from None
    assert watching.returncode == 0, errors.decode()


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def lines_of(process: subprocess.Popen[bytes], *, timeout: float = 60) -> Iterator[str]:
    """The process's output lines as they come; a line later than `timeout` s fails the test.

    Read from the descriptor: several lines may come in one write, which a select() followed
    by a buffered readline() would leave unseen in the stream's buffer."""
    assert process.stdout is not None
    descriptor, pending = process.stdout.fileno(), b""
    while True:
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield line.decode()
        ready, _, _ = select.select([descriptor], [], [], timeout)
        if not ready:
            raise AssertionError(f"no output line within {timeout}s")
        chunk = os.read(descriptor, 65536)
        if not chunk:
            raise AssertionError(f"the process ended (exit code {process.wait()})")
        pending += chunk
