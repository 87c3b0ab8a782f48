"""Splitting an App's inline Spark SQL into statements (pure).

Spark's `spark.sql` runs one statement at a time, and an App's `pipeline.sql` may hold several:
views made by the first ones, the result by the last. Semicolons inside string literals, quoted
identifiers and comments do not end a statement.
"""

from __future__ import annotations

_QUOTES = frozenset("'\"`")


def split_statements(sql: str) -> list[str]:
    """The statements of `sql`, stripped, in order; empty statements are left out."""
    statements: list[str] = []
    start, index, length = 0, 0, len(sql)
    while index < length:
        char = sql[index]
        if char in _QUOTES:
            index = _end_of_quoted(sql, index)
        elif sql.startswith("--", index):
            index = _end_of_line_comment(sql, index)
        elif sql.startswith("/*", index):
            end = sql.find("*/", index + 2)
            index = length if end < 0 else end + 2
        elif char == ";":
            statements.append(sql[start:index])
            start, index = index + 1, index + 1
        else:
            index += 1
    statements.append(sql[start:])
    return [s.strip() for s in statements if _has_code(s)]


def _end_of_quoted(sql: str, index: int) -> int:
    """The index after the literal or identifier opening at `index` (or the end of `sql`).

    A quote is escaped by doubling it; in string literals (not backticks) also by a backslash.
    """
    quote, index = sql[index], index + 1
    while index < len(sql):
        char = sql[index]
        escaped = char == "\\" and quote != "`"
        if escaped or (char == quote and sql.startswith(quote * 2, index)):
            index += 2
        elif char == quote:
            return index + 1
        else:
            index += 1
    return len(sql)


def _end_of_line_comment(sql: str, index: int) -> int:
    end = sql.find("\n", index)
    return len(sql) if end < 0 else end + 1


def _has_code(statement: str) -> bool:
    """Whether a statement holds more than blanks and comments."""
    return bool(strip_comments(statement).strip())


def strip_comments(sql: str) -> str:
    """`sql` without its comments (literals and quoted identifiers kept as they are)."""
    kept: list[str] = []
    index, length = 0, len(sql)
    while index < length:
        if sql[index] in _QUOTES:
            end = _end_of_quoted(sql, index)
            kept.append(sql[index:end])
            index = end
        elif sql.startswith("--", index):
            index = _end_of_line_comment(sql, index)
            kept.append("\n")
        elif sql.startswith("/*", index):
            end = sql.find("*/", index + 2)
            index = length if end < 0 else end + 2
            kept.append(" ")
        else:
            kept.append(sql[index])
            index += 1
    return "".join(kept)
