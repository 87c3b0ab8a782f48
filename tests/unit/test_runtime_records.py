"""Kafka records to rows and back, as Spark SQL expressions.

Test plan:
- views: json gives the schema's columns, string and bytes give key and value; every view has
  timestamp, partition and offset unless the schema has a column of that name;
- bad json records get an error kind and, for dead letters, headers naming reason and source;
- record keys: one column as is (string/bytes), several JSON-encoded; values JSON of the value
  columns (all by default); a Table row whose non-key values are all NULL is a tombstone;
- windowed Tables put the window into the key, or say how to;
- misfits (missing columns, several columns for a string value) are refused with the reason.
"""

from __future__ import annotations

import pytest

from rillet.driverapi import runspecs
from rillet.runtime.queries import records


def _output(**fields: object) -> runspecs.OutputSpec:
    base: dict[str, object] = {"id": "table-t", "kind": "table", "topic": "t", "mode": "upsert"}
    return runspecs.OutputSpec.model_validate({**base, **fields})


def test_quote_and_sql_string_escape() -> None:
    assert records.quote("a`b") == "`a``b`"
    assert records.sql_string("it's a \\ path") == "'it\\'s a \\\\ path'"


def test_view_columns_per_format() -> None:
    assert records.view_exprs("string") == [
        "CAST(key AS STRING) AS key",
        "CAST(value AS STRING) AS value",
        "`timestamp`",
        "`partition`",
        "`offset`",
    ]
    assert records.view_exprs("bytes") == ["key", "value", "`timestamp`", "`partition`", "`offset`"]
    assert records.view_exprs("json", schema_columns=["user", "offset"], source="r") == [
        "r.`user` AS `user`",
        "r.`offset` AS `offset`",
        "`timestamp`",
        "`partition`",
    ]


def test_json_parsing_keeps_the_raw_record_and_a_corrupt_column() -> None:
    exprs = records.parse_exprs("a INT, b STRING")

    assert exprs[:6] == list(records.RAW_COLUMNS)
    parsed = (
        "from_json(CAST(value AS STRING), 'a INT, b STRING, __rillet_corrupt STRING', "
        "map('mode', 'PERMISSIVE', 'columnNameOfCorruptRecord', '__rillet_corrupt'))"
    )
    # Parsed once per record (tests/integration/test_runtime_decoding.py counts it in the plan).
    assert exprs[6] == f"{records.computed_once(parsed)} AS __rillet_row"
    error = records.error_expr()
    assert "value IS NULL" in error  # a tombstone is not a bad record
    assert "'malformed-json'" in error
    assert "'schema-mismatch'" in error


def test_dead_letters_keep_key_and_value_and_carry_the_reason_and_source() -> None:
    exprs = records.dead_letter_exprs(app="orders", reason=records.reason_expr("id STRING"))

    assert exprs[:2] == ["key", "value"]
    headers = exprs[2]
    for name in (
        "rillet.error.kind",
        "rillet.error.reason",
        "rillet.app",
        "rillet.source.topic",
        "rillet.source.partition",
        "rillet.source.offset",
        "rillet.source.timestamp",
    ):
        assert f"'{name}'" in headers
    assert "value does not match the schema: id STRING" in headers
    assert headers.endswith(" AS headers")


def test_a_value_computed_once_is_the_value_itself_behind_a_nondeterministic_guard() -> None:
    # The guard is what stops Spark's optimizer copying the expression (records.computed_once);
    # spark_partition_id() is never negative, so the CASE has no other outcome.
    assert records.computed_once("from_json(x)") == (
        "CASE WHEN spark_partition_id() >= 0 THEN from_json(x) END"
    )


def test_without_dead_letters_a_bad_record_raises_with_its_coordinates() -> None:
    guard = records.fail_on_error_expr(app="orders")

    assert "raise_error(concat('bad record in topic ', topic, ' partition ', partition" in guard
    assert "App orders has no deadLetterTopic" in guard


def test_single_string_key_and_json_value_with_tombstone() -> None:
    exprs = records.build_record_exprs(_output(key_columns=("word",)), ["word", "count"])

    assert exprs.key == "CAST(`word` AS STRING)"
    assert exprs.value == (
        "CASE WHEN `count` IS NULL THEN NULL ELSE "
        "to_json(struct(`word`, `count`), map('ignoreNullFields', 'false')) END"
    )
    assert exprs.select() == [f"{exprs.key} AS key", f"{exprs.value} AS value"]


def test_topic_outputs_have_no_tombstones_and_may_have_no_key() -> None:
    exprs = records.build_record_exprs(
        _output(kind="topic", id="topic-t", mode="append", value_columns=("a",)), ["a", "b"]
    )

    assert exprs.key is None
    assert exprs.value == "to_json(struct(`a`), map('ignoreNullFields', 'false'))"
    assert exprs.select() == [f"{exprs.value} AS value"]


def test_several_key_columns_are_json_and_value_formats_cast() -> None:
    exprs = records.build_record_exprs(
        _output(
            key_columns=("a", "b"), key_format="json", value_columns=("c",), value_format="bytes"
        ),
        ["a", "b", "c"],
    )

    assert exprs.key == "to_json(struct(`a`, `b`), map('ignoreNullFields', 'false'))"
    assert exprs.value == "CASE WHEN `c` IS NULL THEN NULL ELSE CAST(`c` AS BINARY) END"


def test_windowed_table_adds_the_window_column_to_the_key() -> None:
    window = runspecs.WindowSpec(type="tumbling", size_ms=60_000, expiry_ms=60_000)
    output = _output(key_columns=("page",), key_format="json", window=window)

    exprs = records.build_record_exprs(output, ["page", "window", "views"])

    assert exprs.key_columns == ("page", "window")
    assert exprs.key == "to_json(struct(`page`, `window`), map('ignoreNullFields', 'false'))"
    kept = records.build_record_exprs(
        _output(key_columns=("page", "window_start"), key_format="json", window=window),
        ["page", "window_start", "views"],
    )
    assert kept.key_columns == ("page", "window_start")
    with pytest.raises(ValueError, match="needs the window: add window_start"):
        records.build_record_exprs(output, ["page", "views"])


def test_misfits_are_refused_with_the_columns_available() -> None:
    with pytest.raises(ValueError, match=r"no column wrd in the result \(its columns: word, n\)"):
        records.build_record_exprs(_output(key_columns=("wrd",)), ["word", "n"])
    with pytest.raises(ValueError, match="value is string, which holds one column, not 2"):
        records.build_record_exprs(_output(key_columns=("a",), value_format="string"), ["a", "b"])


def test_internal_columns_are_not_written() -> None:
    exprs = records.build_record_exprs(_output(key_columns=("a",)), ["a", "b", "__rillet_error"])

    assert exprs.value_columns == ("a", "b")


def test_rows_without_any_key_column_are_recognised() -> None:
    assert records.has_key_expr(["a", "b"]) == "`a` IS NOT NULL OR `b` IS NOT NULL"


def test_a_lookup_key_is_encoded_as_the_tables_writer_encodes_its_key() -> None:
    output = _output(key_columns=("customer_id",), key_format="json")
    written = records.build_record_exprs(output, ["customer_id", "tier"]).key

    assert (
        records.lookup_key_expr(["customer_id"], "json", what="w") == f"CAST({written} AS BINARY)"
    )
    assert records.lookup_key_expr(["id"], "string", what="w") == (
        "CAST(CAST(`id` AS STRING) AS BINARY)"
    )
    with pytest.raises(ValueError, match="lookups: key is string, which holds one column, not 2"):
        records.lookup_key_expr(["a", "b"], "string", what="lookups: key")


def test_a_looked_up_value_is_shown_as_the_table_inputs_view_shows_values() -> None:
    assert records.lookup_value_expr("v", "json", "tier STRING") == (
        "from_json(CAST(`v` AS STRING), 'tier STRING')"
    )
    assert records.lookup_value_expr("v", "string", None) == "CAST(`v` AS STRING)"
    assert records.lookup_value_expr("v", "bytes", None) == "`v`"
