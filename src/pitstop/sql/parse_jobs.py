"""CREATE, DROP, ALTER and AWAIT JOB: a job's clauses (OPTIONS, FROM SNAPSHOT, UNTIL SNAPSHOT)
and its body, one INSERT or BEGIN ... END around several."""

from __future__ import annotations

import typing as t

from sqlglot import exp
from sqlglot.tokens import TokenType

from pitstop.sql import nodes
from pitstop.sql.parse_base import BaseParser
from pitstop.sql.words import did_you_mean, one_of

JOB_BODY_EXPECTED = "a job's body is INSERT INTO <sink> SELECT ..., or BEGIN ... END around several"

_CLAUSE_NAMES = {"conflict": "ON CONFLICT", "by_name": "BY NAME", "overwrite": "OVERWRITE"}


class JobParser(BaseParser):
    """The parser's part for jobs."""

    ALTER_JOB_ACTIONS: t.ClassVar = {
        "SUSPEND": lambda self: None,
        "RESUME": lambda self: None,
        "RESTART": lambda self: None,
        "OPTIONS": lambda self: self._parse_options(),
    }

    # What a job's INSERT may hold: the sink (a table, or a table with a column list), the
    # query and its CTEs. Anything else sqlglot reads (ON CONFLICT, RETURNING, ...) is refused.
    JOB_INSERT_ARGS: t.ClassVar = frozenset({"this", "expression", "with_"})

    # Clauses between a job's name and AS, in any order: word -> (arg name, parser).
    JOB_CLAUSE_PARSERS: t.ClassVar = {
        "OPTIONS": ("options", lambda self: self._parse_options()),
        "FROM": ("snapshot", lambda self: self._parse_from_snapshot()),
        "UNTIL": ("until", lambda self: self._parse_snapshot_clause("UNTIL", "UNTIL SNAPSHOT <name>")),
    }

    def _parse_create_job(self, replace: bool) -> nodes.CreateJob:
        if replace:
            self.raise_error(
                "CREATE OR REPLACE JOB is not supported: DROP JOB <name> WITH SNAPSHOT <snap>, "
                "then CREATE JOB <name> FROM SNAPSHOT <snap> AS ...",
                self._prev,
            )
        exists = self._parse_exists(not_=True)
        name = self._parse_name("job")
        clauses: dict[str, t.Any] = {}
        while self._match_texts(self.JOB_CLAUSE_PARSERS):
            word = self._prev
            key, parse_clause = self.JOB_CLAUSE_PARSERS[word.text.upper()]
            if key in clauses:
                self.raise_error(f"{word.text.upper()} is given twice for job {name.name!r}", word)
            clauses[key] = parse_clause(self)
        if not self._match(TokenType.ALIAS):
            word = self._curr
            typo = did_you_mean(word.text, [*self.JOB_CLAUSE_PARSERS, "AS"]) if word else ""
            self.raise_error(
                f"expected OPTIONS (...), FROM SNAPSHOT <name> or AS <body> after job {name.name!r}{typo}"
            )
        return self.expression(
            nodes.CreateJob(this=name, exists=exists, body=self._parse_job_body(), **clauses)
        )

    def _parse_from_snapshot(self) -> exp.Identifier:
        return self._parse_snapshot_clause("FROM", "FROM SNAPSHOT <name>")

    def _parse_snapshot_clause(self, after: str, expected: str) -> exp.Identifier:
        word = self._curr
        if not self._match_text_seq("SNAPSHOT"):
            got = f", got {word.text!r}{did_you_mean(word.text, ['SNAPSHOT'])}" if word else ""
            self.raise_error(f"expected SNAPSHOT after {after} ({expected}){got}", word)
        return self._parse_name("snapshot")

    def _parse_job_body(self) -> list[exp.Insert]:
        if not self._match(TokenType.BEGIN):
            return [self._parse_job_insert()]
        inserts: list[exp.Insert] = []
        while not self._match(TokenType.END):
            if not self._curr:
                self.raise_error("expected END to close the job's BEGIN block")
            inserts.append(self._parse_job_insert())
            if not self._match(TokenType.SEMICOLON) and not self._match(TokenType.END, advance=False):
                self.raise_error("expected ';' or END after the INSERT")
        if not inserts:
            self.raise_error(f"empty BEGIN ... END: {JOB_BODY_EXPECTED}", self._prev)
        return inserts

    def _parse_job_insert(self) -> exp.Insert:
        start = self._curr
        with_ = self._parse_with() if self._match(TokenType.WITH, advance=False) else None
        if not (self._match(TokenType.INSERT) or self._match_text_seq("SINK")):
            self.raise_error(JOB_BODY_EXPECTED, self._curr if with_ else start)
        if not self._match(TokenType.INTO, advance=False):
            self.raise_error(f"expected INTO after {self._prev.text.upper()}: {JOB_BODY_EXPECTED}")
        insert = self._parse_insert()
        if not isinstance(insert, exp.Insert) or not isinstance(insert.expression, exp.Query):
            self.raise_error(f"a job's INSERT reads from a SELECT: {JOB_BODY_EXPECTED}", start)
        extra = sorted(k for k, v in insert.args.items() if v and k not in self.JOB_INSERT_ARGS)
        if extra:
            self.raise_error(
                f"a job's INSERT is INSERT INTO <sink> [(<columns>)] SELECT ...: pitstop does not "
                f"support {_CLAUSE_NAMES.get(extra[0], extra[0].upper().replace('_', ' '))} here",
                start,
            )
        if with_ is not None:
            insert.set("with_", with_)
        return t.cast(exp.Insert, insert)

    def _parse_drop_job(self) -> nodes.DropJob:
        exists = self._parse_exists()
        name = self._parse_name("job")
        snapshot = None
        if self._match(TokenType.WITH):
            snapshot = self._parse_snapshot_clause("WITH", f"DROP JOB {name.name} WITH SNAPSHOT <snapshot>")
        return self.expression(nodes.DropJob(this=name, exists=exists, snapshot=snapshot))

    def _parse_alter_job(self) -> nodes.AlterJob:
        name = self._parse_name("job")
        word = self._curr
        if not self._match_texts(self.ALTER_JOB_ACTIONS):
            got = f", got {word.text!r}{did_you_mean(word.text, self.ALTER_JOB_ACTIONS)}" if word else ""
            self.raise_error(
                f"expected {one_of(self.ALTER_JOB_ACTIONS)} after ALTER JOB {name.name}{got}", word
            )
        action = word.text.upper()
        options = self.ALTER_JOB_ACTIONS[action](self)
        if action == "OPTIONS":
            # Hazelcast's ALTER JOB j OPTIONS (...) RESUME: new options, then resume.
            after = self._curr
            if self._match_text_seq("RESUME"):
                action = "RESUME"
            elif after and after.text.upper() in self.ALTER_JOB_ACTIONS:
                self.raise_error(
                    f"only RESUME may follow ALTER JOB {name.name} OPTIONS (...), got {after.text.upper()}",
                    after,
                )
        return self.expression(nodes.AlterJob(this=name, action=action, options=options))

    def _parse_await_job(self) -> nodes.AwaitJob:
        name = self._parse_name("job")
        timeout = None
        word = self._curr
        typo = did_you_mean(word.text, ["TIMEOUT"]) if word.token_type == TokenType.VAR else ""
        if self._match_text_seq("TIMEOUT"):
            timeout = self._parse_pitstop_interval(f"the timeout of AWAIT JOB {name.name}")
        elif typo:
            self.raise_error(
                f"expected TIMEOUT INTERVAL 'n' unit or the end of AWAIT JOB {name.name}, got "
                f"{word.text!r}{typo}",
                word,
            )
        return self.expression(nodes.AwaitJob(this=name, timeout=timeout))
