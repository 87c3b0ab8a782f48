"""split() with a constant regex, as Rillet's session extension plans it (rillet.spark.
SessionExtensions): compiled once, and the same results as Spark's own split.

Test plan:
- over awkward strings (empty, separators at both ends, non-ASCII, null), with limits -1, 0, 1
  and 2, a case-insensitive collation and a single-character regex, split with a constant regex
  (planned as a RegexSplitter) equals split with the same regex read from a column (Spark's
  StringSplit: the rule leaves a regex that is not constant alone), in generated code;
- an empty regex and a regex Java cannot compile stay Spark's: the first splits into
  characters, the second fails the query with Java's message, as without Rillet.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

from rillet_devstack.spark import local_session

STRINGS = [
    "",
    "a",
    "Hello, World!!",
    ",,a,,b,,",
    "  lead and trail  ",
    "ünïcödé wörds, ok",
    None,
    "a1Xb2xc3",
]
# (the string's SQL, regex, limit)
SPLITS = [
    ("lower(s)", "[^a-z0-9]+", -1),
    ("s", "[^a-z0-9]+", 0),
    ("s", "[^a-z0-9]+", 1),
    ("s", ",", 2),
    ("s", "\\s+", -1),
    ("s COLLATE UTF8_LCASE", "x", -1),
]


@pytest.fixture
def strings(tmp_path: Path) -> str:
    """A view of STRINGS, each beside every regex of SPLITS (regex0, regex1...: columns, so not
    constant), read from Parquet: the query runs as generated code over a scan (a local
    relation's projection would be evaluated while planning)."""
    spark = local_session("split-test")
    regexes = [regex for _, regex, _ in SPLITS]
    schema = ", ".join(["s string", *(f"regex{n} string" for n in range(len(SPLITS)))])
    rows = [(s, *regexes) for s in STRINGS]
    spark.createDataFrame(rows, schema).write.parquet(str(tmp_path / "s"))
    view = f"strings_{tmp_path.name.replace('-', '_')}"
    spark.read.parquet(str(tmp_path / "s")).createOrReplaceTempView(view)
    return view


def test_a_constant_regex_is_compiled_once_and_splits_as_spark_does(strings: str) -> None:
    spark = local_session("split-test")
    columns = ", ".join(
        f"split({string}, r'{regex}', {limit}) AS constant{n}, "  # raw: no SQL escapes
        f"split({string}, regex{n}, {limit}) AS spark{n}"
        for n, (string, regex, limit) in enumerate(SPLITS)
    )
    frame = spark.sql(f"SELECT s, {columns} FROM {strings}")

    plan = frame._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("RegexSplitter(") == len(SPLITS), plan
    # Spark's own, with the regex from a column (RegexSplitter's method reads `.split(`).
    assert len(re.findall(r"(?<![.\w])split\(", plan)) == len(SPLITS), plan
    rows = frame.collect()
    assert len(rows) == len(STRINGS)
    for row in rows:
        for n in range(len(SPLITS)):
            assert row[f"constant{n}"] == row[f"spark{n}"], (SPLITS[n], row)
    words = {row["s"]: row["constant0"] for row in rows}
    assert words["Hello, World!!"] == ["hello", "world", ""]
    assert words[",,a,,b,,"] == ["", "a", "b", ""]
    assert words[""] == [""]
    assert words[None] is None


def test_an_empty_or_invalid_regex_is_left_to_spark(strings: str) -> None:
    spark = local_session("split-test")
    empty = spark.sql(f"SELECT split(s, '') AS parts FROM {strings} WHERE s = 'a1Xb2xc3'")
    assert "RegexSplitter" not in empty._jdf.queryExecution().optimizedPlan().toString()
    assert empty.collect()[0]["parts"] == list("a1Xb2xc3")

    invalid = spark.sql(f"SELECT split(s, '[a-') AS parts FROM {strings}")
    assert "RegexSplitter" not in invalid._jdf.queryExecution().optimizedPlan().toString()
    with pytest.raises((Py4JJavaError, PySparkException), match="Illegal character range"):
        invalid.collect()
