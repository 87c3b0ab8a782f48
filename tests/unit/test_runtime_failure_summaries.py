"""A driver's failure in one line, as its pod's termination log and the App's status give it.

Test plan:
- a Python error inside a query gives its last traceback line after the query's name, Spark's
  wrapping and py4j's call line are dropped, a plain line is kept as it is;
- long lines are clipped; an error is summarized by its short type and its first line;
- the line is written to the termination log when that is writable;
- a failed call is described by its HTTP status, never its body or headers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rillet.runtime.pod import terminating

# As Spark 4.2 words them (recorded from local runs).
UDF_FAILURE = (
    "query wc.topic-out failed: [STREAM_FAILED] Query [id = c677, runId = 0d9a] terminated "
    "with exception: [PYTHON_EXCEPTION] An exception was thrown from the Python worker: "
    "Traceback (most recent call last):\n"
    '  File "/app/pipeline.py", line 26, in boom\n'
    '    raise ValueError(f"boom at {x}")\n'
    "ValueError: boom at 0\n"
    " SQLSTATE: 38000 SQLSTATE: XXKST\n"
    "=== Streaming Query ===\n"
    "Identifier: [id = c677, runId = 0d9a]\n"
)
KAFKA_FAILURE = (
    "query wc.table-t failed: [STREAM_FAILED] Query [id = 1, runId = 2] terminated with "
    "exception: org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms expired\n"
    "=== Streaming Query ===\n"
)
PY4J_FAILURE = (
    "An error occurred while calling o42.start.\n"
    ": java.lang.IllegalArgumentException: bad option\n"
    "\tat org.apache.spark.Foo.bar(Foo.scala:1)\n"
)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (UDF_FAILURE, "query wc.topic-out failed: ValueError: boom at 0"),
        (
            KAFKA_FAILURE,
            "query wc.table-t failed: org.apache.kafka.common.errors.TimeoutException: "
            "Timeout of 60000ms expired",
        ),
        (PY4J_FAILURE, "java.lang.IllegalArgumentException: bad option"),
        ("KeyError: 'orders'", "KeyError: 'orders'"),
        ("", ""),
    ],
)
def test_a_failure_in_one_line(text: str, line: str) -> None:
    assert terminating.summarize_text(text) == line


def test_long_failures_are_clipped() -> None:
    assert terminating.summarize_text("x" * 50, limit=10) == "xxxxxxx..."


def test_errors_are_summarized_by_their_short_type() -> None:
    class QueryFailedError(RuntimeError):
        pass

    analysis = (
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `nosuch` cannot be resolved.\n"
        "'Project ['nosuch]\n"
    )
    assert terminating.summarize_error(ValueError(analysis)) == (
        "ValueError: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `nosuch` cannot be resolved."
    )
    assert terminating.summarize_error(QueryFailedError(UDF_FAILURE)) == (
        "query wc.topic-out failed: ValueError: boom at 0"
    )
    assert terminating.summarize_error(KeyError()) == "KeyError"


def test_the_termination_message_is_written_if_it_can_be(tmp_path: Path) -> None:
    path = tmp_path / "termination-log"
    assert terminating.write_termination_message("ValueError: boom", path)
    assert path.read_text() == "ValueError: boom\n"
    assert not terminating.write_termination_message("x", tmp_path / "missing" / "log")


def test_failed_calls_are_described_without_bodies() -> None:
    class ApiError(Exception):
        status, reason, body, headers = 403, "Forbidden", "secret body", {"x": "secret"}

    assert terminating.describe_failure(ApiError("secret")) == "HTTP 403 Forbidden"
    assert terminating.describe_failure(RuntimeError("a\nb")) == "a"
