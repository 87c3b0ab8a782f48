"""The driver's termination message: its length, and the line of it that says what went wrong.

`rillet drive` writes one line saying why the driver failed (runtime.pod.terminating) where
Kubernetes takes the container's termination message from (wiring.TERMINATION_LOG); a driver
that dies without writing it leaves the tail of its log instead (FallbackToLogsOnError). The
operator reads it from the pod's status (reconcile.appstatus): `error_line` is that reader.
A refusal's line starts with its reason's `Type: `, which the status tells apart.
"""

from __future__ import annotations

import re
from typing import Final

# Kubernetes keeps at most 4096 bytes of a termination message; a condition wants one line.
MESSAGE_LIMIT: Final = 1024
# Log lines of the JVM and Python loggers below ERROR, which follow an error in the log tail.
_LOG_NOISE = re.compile(r"^(\S+ )?\S+ (TRACE|DEBUG|INFO|WARN|WARNING) ")


def error_line(message: str | None) -> str | None:
    """The line of a driver's last words that says what went wrong.

    The last non-empty line that is not an INFO/WARN/DEBUG log line (Spark logs its shutdown
    after the error), else the last non-empty line; cut to MESSAGE_LIMIT.
    """
    lines = [line.strip() for line in (message or "").splitlines() if line.strip()]
    if not lines:
        return None
    errors = [line for line in lines if not _LOG_NOISE.match(line)]
    return (errors or lines)[-1][:MESSAGE_LIMIT]


class SchemaRegistryRefusedError(RuntimeError):
    """The schema registry refused an output's schema (incompatible with its subject, or not
    registered where the App registers nothing).

    The driver refuses to start with it; its termination message starts with this class's name,
    which the operator reads into the App's Stalled condition (reason SchemaRegistryRefused),
    naming the subject and the registry's own message.
    """
