"""PostgreSQL's catalog, emulated over DuckDB: what clients ask ``pg_catalog`` and
``information_schema`` when they connect and browse, answered from pitstop's home.

psql, JDBC, SQLAlchemy, asyncpg, pgcli and Superset list tables and columns by querying
``pg_class``, ``pg_attribute``, ``pg_type``... and calling ``format_type``, ``pg_get_expr``,
``::regclass``. DuckDB's own ``pg_catalog`` answers few of those statements, and some wrongly
(DuckDB type ids in ``atttypid``, schema ``main``, OIDs that change per process), and refuses new
entries. So every statement a client sends is rewritten before it reaches DuckDB:

1. it is parsed as PostgreSQL (:mod:`.dialect`: sqlglot, with ``::oid[]``-style array casts added);
2. the top-level result columns get PostgreSQL's names (:mod:`.naming`: ``count``, ``format_type``,
   ``?column?``);
3. references to emulated ``pg_catalog`` / ``information_schema`` relations become references to
   CTEs (``pgc_pg_class``...) that are added to the statement with the CTEs they need;
   ``public`` becomes DuckDB's ``main``;
4. emulated functions (``format_type``, ``pg_get_userbyid``, ``current_schemas``...) are inlined
   as DuckDB expressions; ``::regclass``/``::regtype`` casts become look-ups or names;
   ``OPERATOR(pg_catalog.~)`` a regex match; ``COLLATE pg_catalog.default`` disappears
   (steps 3 and 4: :mod:`.rewrite`);
5. the result is generated as DuckDB SQL (:mod:`.translation`).

The relations are declared by where their rows come from: :mod:`.pg_catalog` (the home and the
session), :mod:`.information_schema`, :mod:`.fixed` (constant or always empty), :mod:`.pg_type`,
over the internal relations of :mod:`.sources` (DuckDB's own catalog); :mod:`.views` is their
registry. The functions' templates are in :mod:`.functions`, OIDs in :mod:`.oids`, and
:class:`PgCatalog` (:mod:`.emulation`) is what a server's sessions use.

Nothing is created in DuckDB but four per-connection macros (``prepare``: the user, the backend
process id and key, the session's settings) and the server's functions behind ``pg_stat_activity``
(:mod:`pitstop.server.activity`): creating temporary views and macros costs ~0.3 ms each, so a
catalog of them would cost every client ~40 ms on connect. Static tables (``pg_type``,
``pg_settings``...) travel as one JSON string each, which DuckDB binds far faster than VALUES.

What the emulated catalog shows: DuckDB schema ``main`` as ``public`` (the sink tables), the
``pitstop`` schema (pitstop's own catalog tables), ``pg_catalog`` and ``information_schema``;
tables with PostgreSQL type OIDs and typmods (from :mod:`pitstop.server.pgtypes`), primary keys,
unique and check constraints with their indexes, comments. Relation OIDs are md5 hashes of
``schema.name`` (:func:`relation_oid`), the same in every process. Every OID column (and
``::oid``, ``::regclass``...) is a DuckDB UINTEGER, which result sets describe as PostgreSQL's oid
(:mod:`pitstop.server.pgtypes`), and a list of them as oid[]. The search path is ``public`` (after
``pg_catalog``): ``pitstop.jobs`` must be qualified.
"""

from __future__ import annotations

from pitstop.server.pgcatalog.dialect import DIALECT
from pitstop.server.pgcatalog.emulation import PgCatalog
from pitstop.server.pgcatalog.oids import DATABASE, relation_oid
from pitstop.server.pgcatalog.translation import translate

__all__ = ["DATABASE", "DIALECT", "PgCatalog", "relation_oid", "translate"]
