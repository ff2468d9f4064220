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
    ``kind`` is the connector identifier as written (File, DuckDB, Generator, Console)."""

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
    ``body`` is a list of ``exp.Insert`` (one per sink branch)."""

    arg_types = {"this": True, "exists": False, "options": False, "snapshot": False, "body": True}


class DropJob(exp.Expression):
    """``DROP JOB [IF EXISTS] name [WITH SNAPSHOT snap]``."""

    arg_types = {"this": True, "exists": False, "snapshot": False}


class ShowJobs(exp.Expression):
    arg_types: t.ClassVar[dict[str, bool]] = {}


class AlterJob(exp.Expression):
    """``ALTER JOB name SUSPEND | RESUME | RESTART | OPTIONS (...)``: ``action`` is the upper-case
    word as a plain string; ``options`` is set only for ``OPTIONS``."""

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


class Explain(exp.Expression):
    """``EXPLAIN <statement>``: ``this`` is the explained statement's node."""

    arg_types = {"this": True}


class WindowTvf(exp.Expression):
    """A window table-valued function in a FROM clause or a join:
    ``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size)) [AS alias]``.

    ``kind`` is the plain string ``'TUMBLE'``, ``'HOP'`` or ``'SESSION'``; ``this`` the source
    ``exp.Table``; ``descriptor`` the time column's ``exp.Identifier``; ``size`` (TUMBLE, HOP),
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
    Explain,
)
"""Every pitstop statement node (ad-hoc queries are sqlglot's own ``exp.Select``/``exp.Union``)."""
