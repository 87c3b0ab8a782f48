"""The batch gate that lets a SIGTERM stop queries at a batch boundary.

Test plan:
- an open gate runs each batch's writes and remembers the last batch written;
- closing waits for the batch being written, then refuses every later batch before it writes
  anything (the refusal names the batch, so the driver knows it was a stop, not a failure).
"""

from __future__ import annotations

import threading

import pytest

from rillet.runtime.queries import writing


def test_open_gate_writes_and_remembers_the_last_batch() -> None:
    gate, written = writing.BatchGate(), []

    gate.write(0, lambda: written.append(0))
    gate.write(1, lambda: written.append(1))

    assert written == [0, 1]
    assert gate.close() == 1


def test_closed_gate_refuses_before_writing() -> None:
    gate, written = writing.BatchGate(), []
    assert gate.close() == -1

    with pytest.raises(writing.StopRequestedError, match="batch 4 not written") as refused:
        gate.write(4, lambda: written.append(4))

    assert written == []
    assert writing.STOP_MARKER in str(refused.value)


def test_closing_waits_for_the_batch_being_written() -> None:
    gate = writing.BatchGate()
    writing_started, release = threading.Event(), threading.Event()
    closed_with: list[int] = []

    def slow_batch() -> None:
        writing_started.set()
        assert release.wait(timeout=10)

    writer = threading.Thread(target=gate.write, args=(7, slow_batch))
    writer.start()
    assert writing_started.wait(timeout=10)
    closer = threading.Thread(target=lambda: closed_with.append(gate.close()))
    closer.start()
    closer.join(timeout=0.2)
    assert closer.is_alive(), "close() must wait while batch 7 is being written"

    release.set()
    writer.join(timeout=10)
    closer.join(timeout=10)
    assert closed_with == [7]
