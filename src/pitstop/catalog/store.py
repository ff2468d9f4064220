"""The DuckDB catalog of a pitstop home: mappings, jobs, runs, snapshots and sink bookkeeping.

Catalog tables live in the ``pitstop`` schema of ``<home>/catalog.duckdb``; DuckDB sink tables live
in its ``main`` schema, so that a sink's rows and its bookkeeping commit in one transaction.
One DuckDB database object is shared by the process; each thread works through its own cursor.

The database itself (opening, upgrading, cursors, transactions, caching) is
:class:`~pitstop.catalog.base.CatalogBase`; each kind of row is a mixin of its own module:
:mod:`.mappings`, :mod:`.views`, :mod:`.jobs` (jobs, runs, sink bookkeeping), :mod:`.snapshots`,
:mod:`.rejects`, :mod:`.late`, :mod:`.metrics`. The schema is :mod:`.schema`, the lineage queries
:mod:`.lineage`, the clock :mod:`.clock`.
"""

from __future__ import annotations

from pitstop.catalog.jobs import JobStore
from pitstop.catalog.late import LateStore
from pitstop.catalog.mappings import MappingStore
from pitstop.catalog.metrics import MetricStore
from pitstop.catalog.rejects import RejectStore
from pitstop.catalog.snapshots import SnapshotStore
from pitstop.catalog.views import ViewStore


class Catalog(MappingStore, ViewStore, JobStore, SnapshotStore, RejectStore, LateStore, MetricStore):
    """Typed access to ``catalog.duckdb``. Safe to use from several threads."""
