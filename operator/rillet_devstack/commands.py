"""Running a build or start-up command with its output kept in a log, and failing with its tail.

A caller that shows progress can also have each line of the output as it comes (`on_line`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO


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
    on_line: Callable[[str], None] | None = None,
    secrets: Sequence[str] = (),
) -> None:
    """Run a command to completion, appending its output to `log`; raise with the log's tail.

    `on_line`, if given, is called with each line of output (stdout and stderr together) as the
    command prints it, after the line is in the log. `secrets` (a password among the
    arguments) are written to the log as `***`.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, **(env or {})}
    shown = " ".join(map(str, args))
    for secret in secrets:
        shown = shown.replace(secret, "***")
    with log.open("ab") as out:
        out.write(f"\n$ {shown}\n".encode())
        out.flush()
        if on_line is None:
            returncode = subprocess.run(
                [str(a) for a in args],
                cwd=cwd,
                env=full_env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                check=False,
            ).returncode
        else:
            returncode = _run_streaming(args, cwd=cwd, env=full_env, out=out, on_line=on_line)
    if returncode != 0:
        raise CommandFailedError(
            f"{args[0]} exited {returncode}; last lines of {log}:\n{tail(log)}"
        )


def _run_streaming(
    args: Sequence[str | Path],
    *,
    cwd: Path | None,
    env: Mapping[str, str],
    out: BinaryIO,
    on_line: Callable[[str], None],
) -> int:
    """Run through a pipe, copying each line to `out` and to `on_line`; return the exit code."""
    with subprocess.Popen(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    ) as process:
        assert process.stdout is not None  # stdout=PIPE
        for raw in process.stdout:
            out.write(raw)
            out.flush()  # the log stays current for anyone tailing it during a long build
            on_line(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
        return process.wait()
