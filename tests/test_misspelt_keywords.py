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
