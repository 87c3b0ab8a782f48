"""Finding the external tools the stack needs (go, java, javac, mvn), and how to get a missing one.

Checked before any work starts, so a missing tool costs a second, not a half-built stack.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable

HOW_TO_GET = {
    "go": "install Go >= 1.24 (apt-get install golang-go, or the tarball from go.dev)",
    "java": "install a JDK >= 17 (apt-get install openjdk-17-jdk-headless)",
    "javac": "install a JDK >= 17 (apt-get install openjdk-17-jdk-headless)",
    "mvn": "install Maven >= 3.8 (apt-get install maven)",
}


class MissingToolError(RuntimeError):
    """A tool the stack needs is not on PATH; the message is one line saying how to get it."""


def require(tools: Iterable[str]) -> dict[str, str]:
    """Return the path of each tool, or raise with a one-line message naming every missing one."""
    found: dict[str, str] = {}
    missing: list[str] = []
    for tool in sorted(set(tools)):
        path = shutil.which(tool)
        if path is None:
            missing.append(tool)
        else:
            found[tool] = path
    if missing:
        advice = "; ".join(f"{tool}: {HOW_TO_GET[tool]}" for tool in missing)
        raise MissingToolError(f"missing on PATH: {', '.join(missing)} ({advice})")
    return found
