"""Splitting inline Spark SQL into statements.

Test plan:
- semicolons end statements, except inside string literals, quoted identifiers and comments;
- escaped quotes (doubled, or backslash in literals) do not end a literal;
- blank and comment-only statements are dropped; a final semicolon is optional.
"""

from __future__ import annotations

import pytest

from rillet.runtime.queries import statements


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT 1", ["SELECT 1"]),
        ("SELECT 1;", ["SELECT 1"]),
        (
            "CREATE TEMP VIEW a AS SELECT 1;\n SELECT * FROM a ;",
            [
                "CREATE TEMP VIEW a AS SELECT 1",
                "SELECT * FROM a",
            ],
        ),
        ("SELECT ';' AS s; SELECT 2", ["SELECT ';' AS s", "SELECT 2"]),
        ('SELECT ";" AS s; SELECT 2', ['SELECT ";" AS s', "SELECT 2"]),
        ("SELECT `a;b` FROM t; SELECT 2", ["SELECT `a;b` FROM t", "SELECT 2"]),
        ("SELECT 'it''s; fine'; SELECT 2", ["SELECT 'it''s; fine'", "SELECT 2"]),
        ("SELECT 'it\\'s; fine'; SELECT 2", ["SELECT 'it\\'s; fine'", "SELECT 2"]),
        (
            "SELECT 1 -- a comment; not a statement\n; SELECT 2",
            [
                "SELECT 1 -- a comment; not a statement",
                "SELECT 2",
            ],
        ),
        ("SELECT /* ; */ 1; SELECT 2", ["SELECT /* ; */ 1", "SELECT 2"]),
        ("-- only a comment;\n;;  ; SELECT 1", ["SELECT 1"]),
        ("", []),
    ],
)
def test_split_statements(sql: str, expected: list[str]) -> None:
    assert statements.split_statements(sql) == expected


def test_unterminated_literal_keeps_the_rest_in_one_statement() -> None:
    assert statements.split_statements("SELECT 'open; SELECT 2") == ["SELECT 'open; SELECT 2"]


def test_strip_comments_keeps_literals() -> None:
    assert statements.strip_comments("SELECT '--x' /* c */ -- d\nFROM t") == (
        "SELECT '--x'   \nFROM t"
    )
