"""Running a build or start-up command with its output kept in a log, and failing with its tail."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path


class CommandFailedError(RuntimeError):
    """A command exited non-zero; the message holds the command and the tail of its log."""


def tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log file, or a note that it does not exist."""
    if not path.exists():
        return f"(no log at {path})"
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - 64 * 1024))
        text = handle.read().decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def run_logged(
    args: Sequence[str | Path],
    *,
    log: Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Run a command to completion, appending its output to `log`; raise with the log's tail."""
    log.parent.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, **(env or {})}
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(map(str, args))}\n".encode())
        out.flush()
        result = subprocess.run(
            [str(a) for a in args],
            cwd=cwd,
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    if result.returncode != 0:
        raise CommandFailedError(
            f"{args[0]} exited {result.returncode}; last lines of {log}:\n{tail(log)}"
        )
