"""How the stack's long steps report themselves to whoever started them.

A step is opened by name as a span of the caller's `Reporter` (the command line shows a status
line per step and how long it took; tests and library calls report nothing); inside it, a long
build may say how far it got through a `Progress` callback, one short line at a time. `Spans`
keeps one span open at a time for steps that follow one another in a build's output.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from types import TracebackType

Progress = Callable[[str], None]
"""Receives a one-line description of how far a build has got, each time that changes."""


def no_progress(_: str) -> None:
    """A progress callback that shows nothing."""


Reporter = Callable[[str], AbstractContextManager[Progress | None]]
"""Reports a step by name; inside it, the step may report how far it got (a long build)."""


@contextlib.contextmanager
def silent(_: str) -> Iterator[None]:
    """A reporter that reports nothing."""
    yield None


class Spans:
    """One reporter span at a time: a new step closes the previous one (reporters cannot nest,
    rich allows one live status at a time). A failure ends the open span with the error."""

    def __init__(self, report: Reporter, prefix: str) -> None:
        self._report = report
        self._prefix = prefix
        self._open = contextlib.ExitStack()

    def start(self, label: str) -> None:
        self._open.close()
        self._open.enter_context(self._report(f"{self._prefix}{label}"))

    def __enter__(self) -> Spans:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        return bool(self._open.__exit__(kind, error, traceback))


def stage_changes(spans: Spans, stage_of: Callable[[str], str | None]) -> Callable[[str], None]:
    """An `on_line` callback opening a span each time `stage_of` names a different stage."""
    current: list[str | None] = [None]

    def on_line(line: str) -> None:
        stage = stage_of(line)
        if stage is not None and stage != current[0]:
            current[0] = stage
            spans.start(stage)

    return on_line
