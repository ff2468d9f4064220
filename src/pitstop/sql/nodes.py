"""Statement nodes of pitstop's SQL dialect.

Each node only declares its children (``arg_types``: name -> required). Names are
``exp.Identifier``; intervals are sqlglot's ``exp.Interval``; options are lists of :class:`Option`.
The SQL text of every node is produced by ``PitstopDialect.Generator.TRANSFORMS``.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp


class Option(exp.Expression):
    """``'key'='value'`` in an OPTIONS list: ``this`` and ``expression`` are string literals."""

    arg_types = {"this": True, "expression": True}


class Watermark(exp.Expression):
    """``WATERMARK FOR ts AS ts - INTERVAL '5' SECOND``: ``this`` is the column identifier,
    ``expression`` the interval subtracted from it."""

    arg_types = {"this": True, "expression": True}


class CreateMapping(exp.Expression):
    """``CREATE [OR REPLACE] MAPPING [IF NOT EXISTS] name [(cols[, WATERMARK ...])] TYPE kind
    [OPTIONS (...)]``. ``columns`` are ``exp.ColumnDef(this=Identifier, kind=DataType)``;
    ``kind`` is the connector identifier as written (File, DuckDB, Generator, Console, Kafka)."""

    arg_types = {
        "this": True,
        "columns": False,
        "watermark": False,
        "kind": True,
        "options": False,
        "replace": False,
        "exists": False,
    }


class DropMapping(exp.Expression):
    arg_types = {"this": True, "exists": False}


class ShowMappings(exp.Expression):
    arg_types: t.ClassVar[dict[str, bool]] = {}


class CreateJob(exp.Expression):
    """``CREATE JOB [IF NOT EXISTS] name [OPTIONS (...)] [FROM SNAPSHOT snap] AS body``.
    ``body`` is a list of ``exp.Insert`` (one per sink branch). ``until`` (``UNTIL SNAPSHOT t``)
    only under ``EXPLAIN ANALYZE``: where its replay ends."""

    arg_types = {
        "this": True,
        "exists": False,
        "options": False,
        "snapshot": False,
        "until": False,
        "body": True,
    }


class DropJob(exp.Expression):
    """``DROP JOB [IF EXISTS] name [WITH SNAPSHOT snap]``."""

    arg_types = {"this": True, "exists": False, "snapshot": False}


class ShowJobs(exp.Expression):
    arg_types: t.ClassVar[dict[str, bool]] = {}


class AlterJob(exp.Expression):
    """``ALTER JOB name SUSPEND | RESUME | RESTART | OPTIONS (...) [RESUME]``: ``action`` is the
    upper-case word as a plain string; ``options`` is set only with ``OPTIONS (...)``, whose action
    is ``'OPTIONS'``, or ``'RESUME'`` for Hazelcast's ``ALTER JOB j OPTIONS (...) RESUME``."""

    arg_types = {"this": True, "action": True, "options": False}


class AwaitJob(exp.Expression):
    """``AWAIT JOB name [TIMEOUT INTERVAL 'n' unit]``."""

    arg_types = {"this": True, "timeout": False}


class DescribeJob(exp.Expression):
    arg_types = {"this": True}


class CreateSnapshot(exp.Expression):
    """``CREATE [OR REPLACE] SNAPSHOT name FOR JOB job``."""

    arg_types = {"this": True, "job": True, "replace": False}


class DropSnapshot(exp.Expression):
    arg_types = {"this": True, "exists": False}


class ShowSnapshots(exp.Expression):
    arg_types: t.ClassVar[dict[str, bool]] = {}


class DescribeSnapshot(exp.Expression):
    arg_types = {"this": True}


class CreateView(exp.Expression):
    """``CREATE [OR REPLACE] VIEW [IF NOT EXISTS] name AS query``: ``expression`` is the query, an
    ``exp.Select`` (possibly with a ``with_``) or an ``exp.Union``."""

    arg_types = {"this": True, "expression": True, "replace": False, "exists": False}


class DropView(exp.Expression):
    """``DROP VIEW [IF EXISTS] name``."""

    arg_types = {"this": True, "exists": False}


class ShowViews(exp.Expression):
    arg_types: t.ClassVar[dict[str, bool]] = {}


class SetOption(exp.Expression):
    """``SET 'key' = 'value'`` (or ``SET dotted.key = 'value'``): ``this`` and ``expression`` are
    string literals. Which keys exist is the executor's business, not the parser's."""

    arg_types = {"this": True, "expression": True}


class Explain(exp.Expression):
    """``EXPLAIN <statement>``: ``this`` is the explained statement's node."""

    arg_types = {"this": True}


class ExplainAnalyze(exp.Expression):
    """``EXPLAIN ANALYZE CREATE JOB ...``: ``this`` is the CREATE JOB; it replays the job's input
    since its snapshot through it (:mod:`pitstop.replay`)."""

    arg_types = {"this": True}


class DropDiff(exp.Expression):
    """``DROP DIFF [IF EXISTS] name``: the tables an EXPLAIN ANALYZE kept."""

    arg_types = {"this": True, "exists": False}


class WindowTvf(exp.Expression):
    """A window table-valued function in a FROM clause or a join:
    ``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size)) [AS alias]``.

    ``kind`` is the plain string ``'TUMBLE'``, ``'HOP'`` or ``'SESSION'``; ``this`` the source, an
    ``exp.Table`` or an ``exp.Subquery`` (Hazelcast's ``TUMBLE((SELECT * FROM TABLE(IMPOSE_ORDER(
    ...))), ...)``); ``descriptor`` the time column's ``exp.Identifier``; ``size`` (TUMBLE, HOP),
    ``slide`` (HOP) and ``gap`` (SESSION) are interval nodes; ``alias`` an ``exp.TableAlias``.
    """

    arg_types = {
        "kind": True,
        "this": True,
        "descriptor": True,
        "size": False,
        "slide": False,
        "gap": False,
        "alias": False,
    }

    @property
    def kind(self) -> str:
        return str(self.args["kind"])


class ImposeOrder(exp.Expression):
    """Hazelcast's ``TABLE(IMPOSE_ORDER(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND)) [AS alias]``
    in a FROM clause or a join: ``this`` is the source ``exp.Table``, ``descriptor`` the time
    column's ``exp.Identifier``, ``lag`` the interval events may arrive late by (the watermark
    delay), ``alias`` an ``exp.TableAlias``."""

    arg_types = {"this": True, "descriptor": True, "lag": True, "alias": False}


STATEMENT_NODES: tuple[type[exp.Expression], ...] = (
    CreateMapping,
    DropMapping,
    ShowMappings,
    CreateJob,
    DropJob,
    ShowJobs,
    AlterJob,
    AwaitJob,
    DescribeJob,
    CreateSnapshot,
    DropSnapshot,
    ShowSnapshots,
    DescribeSnapshot,
    CreateView,
    DropView,
    ShowViews,
    SetOption,
    Explain,
    ExplainAnalyze,
    DropDiff,
)
"""Every pitstop statement node (ad-hoc queries are sqlglot's own ``exp.Select``/``exp.Union``)."""
