"""A misspelt keyword in a statement is reported at the misspelt word, with the keyword it
was probably meant to be; words that only look like keywords (columns named ``form``, aliases
written with AS, quoted names) are left alone.

What each case reported before the fix (issue 10, point 5), from ``parse_script``
("no hint": no message named the keyword):

    CREATE JOB j AS INSERT INTO t SELEC a FROM s     (1, 17) at INSERT: "a job's INSERT reads
                                                     from a SELECT"
    CREATE JOB j AS INSERT INTO t SELECT a FORM s    (1, 45) at s: "unexpected 's'"
    ... FROM s GROUP BUY k                           (1, 68) at BUY: "unexpected 'BUY'", no hint
    ... WHERE x > 1 ORDR BY a                        (1, 59) at ORDR: "unexpected 'ORDR'", no hint
    CREATE JOB j AS INSER INTO t SELECT a FROM s     (1, 17) at INSER: "a job's body is INSERT
                                                     INTO ...", no hint
    ... AS BEGIN INSERT INTO a ...; INSRT INTO b ... (1, 54) at INSRT: the same, no hint
    FROM TABLE(TUMBEL(TABLE s, ...))                 at TUMBEL: "...; did you mean TUMBLE?" (right)
    TUMBLE(TABLE s, DESCRIPTER(ts), ...)             at DESCRIPTER: "TUMBLE expects
                                                     DESCRIPTOR(...)", no hint
    TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVL '1' ...) at INTERVL: "expected an interval such as
                                                     ...", no hint
    CRATE JOB j ...                                  (1, 1) "...; did you mean CREATE?" (right)
    DROP JOB j WITH SNAPSHT s                        (1, 17) "...; did you mean SNAPSHOT?" (right)
    CREATE MAPING m TYPE File                        (1, 8) "...; did you mean MAPPING?" (right)
    SHOW JOS                                         (1, 6) "...; did you mean JOBS?" (right)
    CREATE JOB j AS\nINSERT INTO t\nSELEC a\nFROM s (2, 1) at INSERT, the line before SELEC
    CREATE JOB j AS INSERT INTO t\nSELECT a\nFORM s  (3, 6) at s, after FORM
    ...\nFROM s\nWHER x > 1                          (4, 6) at x, after WHER

So the statement-level words of pitstop were already right; inside a job's query the caret sat at
the start of the INSERT (a line early on a multi-line job), or on the word after an unknown word
that sqlglot had read as an alias, and no message named the keyword.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlglot import exp

from pitstop.errors import SqlError
from pitstop.sql import nodes
from pitstop.sql.parser import parse_script


def error_of(text: str) -> SqlError:
    with pytest.raises(SqlError) as caught:
        parse_script(text)
    return caught.value


# Valid statements whose names look like (misspelt) keywords: they parse as they are.
LOOKALIKE_NAMES = [
    "CREATE JOB j AS INSERT INTO t SELECT form, selec, wher, ordr FROM s",
    "CREATE JOB j AS INSERT INTO t SELECT form FROM s WHERE selec > 1 ORDER BY wher",
    'CREATE JOB j AS INSERT INTO t SELECT "FORM", "SELEC" FROM s',
    "CREATE JOB j AS INSERT INTO t SELECT a AS form FROM s AS ordr",
    "CREATE JOB j AS INSERT INTO t SELECT a form FROM s ordr",
    "CREATE JOB j AS INSERT INTO t SELECT k, COUNT(*) AS buy FROM s GROUP BY k",
    "CREATE JOB j AS INSERT INTO t SELECT window_start, COUNT(*) AS n "
    "FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(descripter), INTERVAL '1' HOUR)) GROUP BY window_start",
    "CREATE MAPPING m (form BIGINT, selec VARCHAR, intervl TIMESTAMP) TYPE File",
    "SELECT insrt, tumbel FROM s WHERE limt = 1",
]


@pytest.mark.parametrize("text", LOOKALIKE_NAMES)
def test_names_that_look_like_misspelt_keywords_still_parse(text: str) -> None:
    [statement] = parse_script(text)
    assert isinstance(statement.node, (nodes.CreateJob, nodes.CreateMapping, exp.Select))


@pytest.mark.parametrize(
    ("text", "col", "message"),
    [
        # an alias written with AS is never a misspelling
        ("SELECT a AS form s", 18, "unexpected 's': expected the end of the statement"),
        # a quoted name is never a keyword
        ('SELECT a "FORM" s', 17, "unexpected 's': expected the end of the statement"),
        # SELECT is not a word that can stand there, so 'selec' is taken for the column it looks like
        ("SELECT a FROM s WHERE x = selec 1", 33, "unexpected '1': expected the end of the statement"),
    ],
)
def test_a_lookalike_word_next_to_an_error_is_not_called_a_misspelling(
    text: str, col: int, message: str
) -> None:
    err = error_of(text)
    assert (err.line, err.col, err.message) == (1, col, message)


WINDOW_JOB = (
    "CREATE JOB j AS INSERT INTO t SELECT window_start, COUNT(*) AS n\n"
    "FROM TABLE({window})\n"
    "GROUP BY window_start"
)

# (script, line, col, word, keyword): the misspelt word, where it starts, what it should be.
MISSPELT_IN_A_QUERY = [
    ("CREATE JOB j AS INSERT INTO t SELEC a FROM s", 1, 31, "SELEC", "SELECT"),
    ("CREATE JOB j AS INSERT INTO t SELECT a FORM s", 1, 40, "FORM", "FROM"),
    ("CREATE JOB j AS INSERT INTO t SELECT k, COUNT(*) AS n FROM s GROUP BUY k", 1, 68, "BUY", "BY"),
    ("CREATE JOB j AS INSERT INTO t SELECT a FROM s WHERE x > 1 ORDR BY a", 1, 59, "ORDR", "ORDER"),
    ("CREATE JOB j AS INSER INTO t SELECT a FROM s", 1, 17, "INSER", "INSERT"),
    (
        "CREATE JOB j AS BEGIN INSERT INTO a SELECT x FROM s; INSRT INTO b SELECT x FROM s; END",
        1,
        54,
        "INSRT",
        "INSERT",
    ),
    (
        WINDOW_JOB.format(window="TUMBLE(TABLE s, DESCRIPTER(ts), INTERVAL '1' HOUR)"),
        2,
        28,
        "DESCRIPTER",
        "DESCRIPTOR",
    ),
    (
        WINDOW_JOB.format(window="TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVL '1' HOUR)"),
        2,
        44,
        "INTERVL",
        "INTERVAL",
    ),
    ("CREATE JOB j AS INSERT INTO t SELECT a FROM s WHER x > 1", 1, 47, "WHER", "WHERE"),
    ("CREATE JOB j AS INSERT INTO t SELECT a FROM s JION r ON s.a = r.a", 1, 47, "JION", "JOIN"),
    ("CREATE JOB j AS INSERT INTO t SELECT k FROM s GROUP BY k HAVNG COUNT(*) > 1", 1, 58, "HAVNG", "HAVING"),
    ("SELECT a FROM s UNOIN ALL SELECT a FROM r", 1, 17, "UNOIN", "UNION"),
    ("SELECT a FROM s LIMT 5", 1, 17, "LIMT", "LIMIT"),
    ("SELECT a form s", 1, 10, "form", "FROM"),
    # the word after the one sqlglot stops at
    ("SELECT a FROM s LEFT JION r ON s.a = r.a", 1, 22, "JION", "JOIN"),
    ("SELECT a FROM s GROUP BY a ORDER BUY a", 1, 34, "BUY", "BY"),
    ("CREATE SNAPSHOT s FOR JOBB j", 1, 23, "JOBB", "JOB"),
    # pitstop's words that the dialect matches as text
    ("CREATE MAPPING m (a BIGINT) TYPE File OPTINS ('path'='x')", 1, 39, "OPTINS", "OPTIONS"),
    ("AWAIT JOB j TIMEOUT INTERVL '1' SECOND", 1, 21, "INTERVL", "INTERVAL"),
    # on a line of their own: the caret is on the word's line, not on the line before or after
    ("CREATE JOB j AS\nINSERT INTO t\nSELEC a\nFROM s", 3, 1, "SELEC", "SELECT"),
    ("CREATE JOB j AS INSERT INTO t\nSELECT a\nFORM s", 3, 1, "FORM", "FROM"),
    ("CREATE JOB j AS INSERT INTO t\nSELECT a\nFROM s\nWHER x > 1", 4, 1, "WHER", "WHERE"),
    ("CREATE JOB j AS INSERT INTO t\nSELECT a FROM s\nWHERE x > 1\nORDR BY", 4, 1, "ORDR", "ORDER"),
    ("CREATE JOB j AS INSERT INTO t SELECT k FROM s\nGROUP BUY k", 2, 7, "BUY", "BY"),
    (
        "CREATE JOB j AS BEGIN\n  INSERT INTO a SELECT x FROM s;\n  INSRT INTO b SELECT x FROM s;\nEND",
        3,
        3,
        "INSRT",
        "INSERT",
    ),
    # after other statements: positioned in the script
    ("SHOW JOBS;\nSHOW MAPPINGS; SELECT a\n  FORM s;", 3, 3, "FORM", "FROM"),
]


@pytest.mark.parametrize(("script", "line", "col", "word", "keyword"), MISSPELT_IN_A_QUERY)
def test_a_misspelt_keyword_in_a_query_is_reported_at_the_word(
    script: str, line: int, col: int, word: str, keyword: str
) -> None:
    err = error_of(script)
    assert (err.line, err.col) == (line, col), str(err)
    assert err.message == f"unknown word {word!r} — did you mean {keyword}?"
    assert err.source_line == script.split("\n")[line - 1]
    assert err.source_line[col - 1 :].startswith(word)
    assert str(err).split("\n")[-1] == "  " + " " * (col - 1) + "^"


# Words the dialect reads itself already say "did you mean" in their own message.
MISSPELT_PITSTOP_WORDS = [
    ("CRATE JOB j AS INSERT INTO t SELECT a FROM s", 1, 1, "unknown statement 'CRATE'", "CREATE"),
    ("DROP JOB j WITH SNAPSHT s", 1, 17, "expected SNAPSHOT after WITH", "SNAPSHOT"),
    ("CREATE MAPING m TYPE File", 1, 8, "expected JOB, MAPPING, SNAPSHOT or VIEW after CREATE", "MAPPING"),
    ("SHOW JOS", 1, 6, "expected JOBS, MAPPINGS, SNAPSHOTS or VIEWS after SHOW", "JOBS"),
    ("SHOW JOBS;\n  SHOW SNAPSHOST", 2, 8, "expected JOBS, MAPPINGS, SNAPSHOTS or VIEWS", "SNAPSHOTS"),
    (
        WINDOW_JOB.format(window="TUMBEL(TABLE s, DESCRIPTOR(ts), INTERVAL '1' HOUR)"),
        2,
        12,
        "unknown table function 'TUMBEL' in TABLE(...)",
        "TUMBLE",
    ),
    ("SELEC a FROM s", 1, 1, "unknown statement 'SELEC'", "SELECT"),
]


@pytest.mark.parametrize(("script", "line", "col", "start", "keyword"), MISSPELT_PITSTOP_WORDS)
def test_a_misspelt_pitstop_word_keeps_its_own_message_and_suggestion(
    script: str, line: int, col: int, start: str, keyword: str
) -> None:
    err = error_of(script)
    assert (err.line, err.col) == (line, col), str(err)
    assert err.message.startswith(start)
    assert err.message.endswith(f"; did you mean {keyword}?")


def test_a_hint_for_another_sqls_statement_is_not_turned_into_a_suggestion() -> None:
    # RESET is close to SET, but it is Flink's statement and has a hint of its own.
    err = error_of("RESET 'k'")
    assert (err.line, err.col) == (1, 1)
    assert err.message.startswith("RESET is not a pitstop statement")


def test_statements_sqlglot_would_make_a_command_still_fail_clearly() -> None:
    for text, start in [
        ("CALL p()", "unknown statement 'CALL'"),
        ("EXECUTE x", "EXECUTE STATEMENT SET is Flink's"),
        ("GRANT SELECT ON t TO u", "unknown statement 'GRANT'"),
    ]:
        err = error_of(text)
        assert (err.line, err.col) == (1, 1) and err.message.startswith(start), str(err)


def test_pitstop_check_puts_the_caret_under_the_misspelt_word(tmp_path: Path) -> None:
    script = tmp_path / "jobs.sql"
    script.write_text(
        "CREATE MAPPING s (a BIGINT, ts TIMESTAMP) TYPE Generator;\n"
        "CREATE MAPPING t TYPE Console;\n"
        "CREATE JOB j AS\n"
        "INSERT INTO t\n"
        "SELECT a\n"
        "    FORM s;\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pitstop.cli", "--home", str(tmp_path / "home"), "check", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert f"{script}: 2 statement(s) OK, 1 error(s)" in done.stdout
    first, source, caret = done.stderr.splitlines()
    assert first == f"{script}: ERROR at line 6, col 5: unknown word 'FORM' — did you mean FROM?"
    assert source == "      FORM s;"
    assert caret.index("^") == source.index("FORM")
