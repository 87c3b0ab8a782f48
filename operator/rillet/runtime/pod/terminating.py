"""The driver's last words: one line saying why it failed, where Kubernetes takes it from.

`rillet drive` writes the line to the container's termination message (wiring.TERMINATION_LOG);
the operator reads it from the pod's status into the App's conditions (reconcile.appstatus,
which recognizes refusals by their `Type: ` prefix, e.g. runspecs.ContractMismatchError).
`describe_failure` says the same of a failed call of the in-cluster loop, in a log line.
"""

from __future__ import annotations

import re
from pathlib import Path

from rillet.driverapi import terminations, wiring

TERMINATION_LOG = Path(wiring.TERMINATION_LOG)

_TRACEBACK = "Traceback (most recent call last):"
_STREAM_FAILED = re.compile(r"\[STREAM_FAILED\] Query \[[^\]]*\] terminated with exception: ")
_QUERY_FAILED = re.compile(r"^(query \S+ failed): ")
_PY4J_CALL = "An error occurred while calling"


def summarize_text(text: str, *, limit: int = terminations.MESSAGE_LIMIT) -> str:
    """One line saying what went wrong, from an error's text.

    A Python traceback inside the text (a UDF or foreachBatch raising in a query) gives its
    last line (`ValueError: ...`), after the failed query's name; otherwise the first line
    that says something, without Spark's wrapping.
    """
    context = _QUERY_FAILED.match(text)
    prefix = f"{context.group(1)}: " if context else ""
    if _TRACEBACK in text:
        after = text.rsplit(_TRACEBACK, 1)[1].splitlines()
        line = next((x for x in after if x.strip() and not x[:1].isspace()), "")
        if line:
            return _clip(prefix + line.strip(), limit)
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    if len(lines) > 1 and _PY4J_CALL in lines[0]:  # the Java exception is on the next line
        lines = [lines[1].removeprefix(": "), *lines[2:]]
    return _clip(_STREAM_FAILED.sub("", lines[0]) if lines else text.strip(), limit)


def summarize_error(error: BaseException, *, limit: int = terminations.MESSAGE_LIMIT) -> str:
    """One line for an error that ended the driver: `Type: message`, or the query's failure.

    (driving.QueryFailedError is told by its name: importing driving imports pyspark.)
    """
    text = str(error) if type(error).__name__ == "QueryFailedError" else _exception_only(error)
    return summarize_text(text, limit=limit)


def _exception_only(error: BaseException) -> str:
    """`Type: message`, as a traceback ends (the type's short name)."""
    message = str(error)
    return f"{type(error).__qualname__}: {message}" if message else type(error).__qualname__


def _clip(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


def write_termination_message(message: str, path: Path = TERMINATION_LOG) -> bool:
    """Write the message where Kubernetes takes the container's termination message from."""
    try:
        with path.open("w", encoding="utf-8") as stream:
            stream.write(message + "\n")
    except OSError:
        return False
    return True


def describe_failure(error: BaseException) -> str:
    """A short line for a failed call in the loop: an HTTP status, never headers or bodies."""
    status = getattr(error, "status", None)
    if isinstance(status, int):
        return f"HTTP {status} {getattr(error, 'reason', '') or ''}".strip()
    return _clip(summarize_text(str(error)) or type(error).__name__, 200)
