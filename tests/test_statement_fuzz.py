"""The statement front end under random and mutated SQL (issue 26: "hostile input gets a sentence,
never a traceback"). Statements from the README and the examples, mutated token by token
(dropped, doubled, swapped, truncated, replaced by keywords, punctuation, odd names and numbers,
NUL and other control characters), go through what every front end runs first: the splitter,
the parser and check mode's planner (``pitstop check``: every statement planned against a real
catalog file, nothing started). Each must end in pitstop's own errors, each with a message and a
position, or pass: no other exception. Bounded in count, with a fixed seed; no Spark."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from pitstop.catalog.store import Catalog
from pitstop.driver import Driver
from pitstop.errors import PitstopError
from pitstop.executor import Executor
from pitstop.sql.parser import split_statements

ROOT = Path(__file__).resolve().parent.parent
SEED = 20261127
ROUNDS = 1200

TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/|\w+|\s+|.", re.S)
POOL = [
    *"CREATE DROP ALTER JOB JOBS SNAPSHOT SNAPSHOTS MAPPING VIEW FROM AS WITH OPTIONS TYPE SELECT INSERT "
    "INTO BEGIN END TABLE TUMBLE HOP SESSION DESCRIPTOR INTERVAL WATERMARK FOR GROUP BY ORDER LIMIT "
    "WHERE HAVING JOIN ON AND OR NOT NULL DISTINCT OVER PARTITION ROW_NUMBER EXPLAIN ANALYZE UNTIL "
    "SUSPEND RESUME RESTART AWAIT TIMEOUT SHOW DESCRIBE IF EXISTS REPLACE SET DIFF SECOND HOUR".split(),
    "(",
    ")",
    ",",
    ";",
    "'",
    '"',
    "*",
    "=",
    "--",
    "/*",
    "::",
    "$1",
    "?",
    "\x00",
    "\x1b[2J",
    "\u202e",
    "é",
    "😀",
    "9" * 40,
    "1e309",
    "-0",
    "'5' SECOND",
    "INTERVAL '-1' HOUR",
    "'a''b'",
    '"x""y"',
    "x" * 300,
    "a.b.c.d",
    "/*+ STAGE(x) */",
    '/*+ STAGE("a b") */',
    "DESCRIPTOR(ts)",
    "TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' HOUR))",
]


def corpus() -> list[str]:
    """Every SQL statement of the README's sql blocks and the examples' files (:func:`scripts`),
    and the statements the README writes inline (some are templates: `DROP JOB [IF EXISTS] j`)."""
    starts = "CREATE|DROP|ALTER|SHOW|DESCRIBE|EXPLAIN|AWAIT|SELECT|SET|INSERT|WITH"
    inline = re.findall(rf"`((?:{starts}) [^`]+)`", (ROOT / "README.md").read_text())
    found = [st for script in scripts() for st in script]
    found += [st for text in inline for st, _, _ in split_statements(text)]
    return [s.strip() for s in found if s.strip()]


def mutate(rng: random.Random, statement: str) -> str:
    tokens = TOKEN.findall(statement)
    for _ in range(rng.randint(1, 3)):
        if not tokens:
            break
        i = rng.randrange(len(tokens))
        op = rng.randrange(6)
        if op == 0:
            del tokens[i]
        elif op == 1:
            tokens.insert(i, tokens[i])
        elif op == 2 and i + 1 < len(tokens):
            tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
        elif op == 3:
            tokens = tokens[: i + 1]
        elif op == 4:
            tokens[i] = rng.choice(POOL)
        else:
            tokens.insert(i, " " + rng.choice(POOL) + " ")
    return "".join(tokens)


@pytest.fixture(scope="module")
def statements() -> list[str]:
    found = corpus()
    assert len(found) > 150, "the corpus lost its statements"
    return found


def scripts() -> list[list[str]]:
    """The examples' files and the README's sql blocks, each as its statements: a mutated
    statement is checked after the ones before it, so it is planned against their mappings."""
    texts = [p.read_text() for p in sorted((ROOT / "examples").rglob("*.sql"))]
    texts += re.findall(r"```sql\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    return [[st for st, _, _ in split_statements(text)] for text in texts]


def test_mutated_statements_end_in_pitstop_errors_with_a_position(
    tmp_path: Path, statements: list[str]
) -> None:
    """Check mode (``pitstop check``) over a real catalog file: a script of the corpus with one
    or two statements mutated, or a mutated statement of the corpus on its own."""
    catalog = Catalog(tmp_path / "catalog.duckdb")
    whole = [s for s in scripts() if len(s) > 1]
    try:
        rng = random.Random(SEED)
        errors_seen = clean = 0
        for round_ in range(ROUNDS):
            if round_ % 2:
                script = list(rng.choice(whole))
                for _ in range(rng.randint(1, 2)):
                    i = rng.randrange(len(script))
                    script[i] = mutate(rng, script[i])
                text = ";\n".join(script) + ";\n"
            else:
                base = rng.choice(statements)
                text = (mutate(rng, base) if round_ % 10 else base) + "\n"
            try:
                _, errors = Driver(Executor(None, catalog)).check(text, "fuzz.sql")
            except PitstopError as err:  # a front end shows these: a message is all it needs
                errors = [err]
            except Exception as exc:  # noqa: BLE001 - what the test is looking for
                raise AssertionError(
                    f"round {round_}: {type(exc).__name__}: {exc}\nscript:\n{text!r}"
                ) from exc
            clean += not errors
            for err in errors:
                errors_seen += 1
                assert str(err).strip(), f"round {round_}: an error without a message for {text!r}"
                assert err.line is not None, f"round {round_}: '{err}' has no position, for {text!r}"
        # The test saw both: errors, and mutated scripts that still plan (deep paths reached).
        assert errors_seen > ROUNDS // 2 and clean > ROUNDS // 20, (errors_seen, clean)
    finally:
        catalog.close()


def test_random_text_ends_in_pitstop_errors(tmp_path: Path) -> None:
    """Not SQL at all: random characters, including control characters and odd Unicode."""
    catalog = Catalog(tmp_path / "catalog.duckdb")
    alphabet = "abcXYZ019 _;,.()'\"*=<>-+/\\\n\t\x00\x07\u00e9\u202e\U0001f600$?:[]{}|%"
    try:
        rng = random.Random(SEED + 1)
        for round_ in range(300):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80)))
            try:
                Driver(Executor(None, catalog)).check(text, "fuzz.sql")
            except PitstopError:
                pass
            except Exception as exc:  # noqa: BLE001 - what the test is looking for
                raise AssertionError(f"round {round_}: {type(exc).__name__}: {exc}\ntext: {text!r}") from exc
    finally:
        catalog.close()
