"""Which section of the site a page is in, from the map this package ships (sections.json).

`section_of` is the UDF the pipeline applies: it runs in the executors' Python workers, row by
row, never in the driver. Each worker reads the map from the package once, and says so on its
stderr, which Spark copies into the executor's log: `kubectl logs <executor pod>` shows where
the code ran and that the package is there.
"""

from __future__ import annotations

import functools
import json
import socket
import sys
from importlib import resources


@functools.cache
def _sections() -> dict[str, str]:
    sections: dict[str, str] = json.loads(
        resources.files(__package__).joinpath("sections.json").read_text(encoding="utf-8")
    )
    print(
        f"clicksessions: {len(sections)} sections loaded on {socket.gethostname()}",
        file=sys.stderr,
        flush=True,
    )
    return sections


def section_of(page: str | None) -> str:
    """The section of a page path by its first segment: `home` for `/`, `other` when the map
    does not know it."""
    first = (page or "").strip("/").split("/", 1)[0]
    if not first:
        return "home"
    return _sections().get(first, "other")
