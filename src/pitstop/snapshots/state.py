"""``snapshot_state('snapshot', 'stage')``: a snapshot's state as a table any SELECT can read.

    SELECT * FROM snapshot_state('revenue_v1', 'daily_revenue.aggregate') ORDER BY window_start;

One row per row of the stage's state contract (:mod:`pitstop.stages`): the keys, the window
bounds (window kinds) or ``expires_at`` (deduplication), then the job's output columns finished
from the accumulators (``revenue``, ``orders``, an average...), then the raw accumulators
(``acc0``...). The finish expressions are the ones the job ran: the projection the planner put
over the stage (:func:`pitstop.stages.accumulators.plan_aggregate`), as the snapshot's manifest
records it, translated from Spark SQL to DuckDB by sqlglot. Filters after the stage (``HAVING``)
are not applied: the state holds every group. An output column that needs more than the state
(a deduplicated row's other columns), or that DuckDB cannot compute, is left out (the log says
which); the raw accumulators are always there.

How a query reads it, without Spark and without giving DuckDB access to files:

1. :func:`calls` finds each ``snapshot_state('s', 'stage')`` in the query's text (sqlglot's
   tokenizer, so a name inside a string or a comment is not one).
2. :func:`state_table` reads the stage's Parquet files with pyarrow, from the folder the catalog's
   snapshot row names (``<snapshot>/stages/<stage>/``), and computes the finished columns with
   DuckDB over that Arrow table.
3. :func:`resolve` puts a name of its own where each call was; the caller registers the tables
   under those names on the connection that runs the query, and forgets them when it is done.

Why this way: a server's DuckDB runs with ``enable_external_access`` off (``server/app.py``), so
that a client can never read the server's files (``read_parquet('/etc/...')``). A table macro
over ``read_parquet`` would need that access back, for every path. Here only pitstop reads
files, only a snapshot's own rows, found through the catalog by name (checked against the
snapshots folder by :func:`pitstop.names.safe_path`); DuckDB sees an Arrow table in memory,
which it may read with external access off. Snapshots are never changed after they are written,
so a query's state tables are read once per query.
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from pitstop.catalog.rows import Snapshot
from pitstop.errors import CatalogError, PlanError, UnknownObjectError
from pitstop.names import quote_ident, safe_path
from pitstop.spelling import close_name
from pitstop.stages import registry as kinds

if TYPE_CHECKING:
    import duckdb

    from pitstop.catalog.store import Catalog

log = logging.getLogger(__name__)
FUNCTION = "snapshot_state"
USAGE = "snapshot_state('snapshot', 'stage'), e.g. SELECT * FROM snapshot_state('revenue_v1', 'daily')"
_names = itertools.count(1)


@dataclass(frozen=True)
class StateCall:
    """One ``snapshot_state(...)`` in a query's text: where it stands and what it names."""

    start: int  # offset of the function's name
    end: int  # offset just after its closing parenthesis
    snapshot: str
    stage: str


def mentions(sql: str) -> bool:
    """Cheap first test: whether the text may hold a call at all."""
    return FUNCTION in sql.lower()


def calls(sql: str) -> list[StateCall]:
    """Step 1. Every ``snapshot_state('s', 'stage')`` call in ``sql``; PlanError for a call whose
    arguments are not two quoted names."""
    try:
        tokens = sqlglot.tokenize(sql, read="duckdb")
    except sqlglot.errors.TokenError as exc:
        raise PlanError(f"cannot read the query: {exc}") from None
    found: list[StateCall] = []
    for i, tok in enumerate(tokens):
        if tok.token_type != TokenType.VAR or tok.text.lower() != FUNCTION:
            continue
        if i + 1 >= len(tokens) or tokens[i + 1].token_type != TokenType.L_PAREN:
            continue  # a column or table of that name, not a call
        args = tokens[i + 2 : i + 6]
        shape = [t.token_type for t in args]
        if shape != [TokenType.STRING, TokenType.COMMA, TokenType.STRING, TokenType.R_PAREN]:
            raise PlanError(f"{FUNCTION}(...) takes two quoted names: {USAGE}")
        found.append(StateCall(tok.start, args[3].end + 1, args[0].text, args[2].text))
    return found


def state_table(snapshot: Snapshot, stage: str) -> pa.Table:
    """Step 2. The rows of one stage of a snapshot, finished into the job's output columns."""
    entries: dict[str, Any] = snapshot.manifest.get("stages", {})
    name = stage if stage in entries else next((n for n in entries if n.lower() == stage.lower()), None)
    if name is None:
        known = ", ".join(f"'{n}'" for n in sorted(entries)) or "none"
        longer = [n for n in entries if n.lower().startswith(stage.lower() + ".")]  # 'daily.aggregate'
        hint = f" (did you mean '{longer[0]}'?)" if len(longer) == 1 else close_name(stage, list(entries))
        raise CatalogError(
            f"snapshot '{snapshot.name}' has no stage '{stage}'{hint}; its "
            f"stages: {known} (DESCRIBE SNAPSHOT {snapshot.name} shows them)"
        )
    old = kinds.manifest_stages(snapshot.name, {"stages": {name: entries[name]}})[name]
    folder = safe_path(Path(snapshot.path) / "stages", "stage", name)
    files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    if not files:  # export writes one file at least, even for no rows
        raise CatalogError(
            f"snapshot '{snapshot.name}', stage '{name}': its rows ({folder}) are missing, so its state "
            "cannot be read; the snapshot's files were moved or deleted. Take a new snapshot of the job "
            "(CREATE SNAPSHOT ... FOR JOB ...) to read its state"
        )
    table = naive_utc(pa.concat_tables([pq.read_table(f) for f in files]))
    accumulators = [a.name for a in old.accumulators]
    helpers: list[str] = []
    for acc in (a for a in old.accumulators if a.kind == "hll" and a.name in table.column_names):
        helpers.append(estimate_column(acc.name))
        table = table.append_column(helpers[-1], hll_estimates(table.column(acc.name)))
    finished = finish_columns(snapshot.manifest, name, list(table.column_names))
    if not finished:
        return table.drop_columns(helpers)
    # A private in-memory DuckDB computes them, with file access off like a server's: the
    # expressions come from a job's SQL, and read nothing but the state.
    import duckdb

    with duckdb.connect() as finisher:
        finisher.execute("SET TimeZone = 'UTC'")  # as the catalog: not the machine's zone
        finisher.execute("SET enable_external_access = false")
        finisher.register("state", table)
        kept = []
        for out, sql in finished:  # one DuckDB does not take (a Spark function it lacks) is left out
            try:
                finisher.execute(f"SELECT {sql} FROM state LIMIT 0")
                kept.append(f"{sql} AS {quote_ident(out)}")
            except duckdb.Error as exc:
                log.warning(
                    "snapshot '%s', stage '%s': column %s left out (%s)", snapshot.name, name, out, exc
                )
        firsts = [quote_ident(c) for c in table.column_names if c not in accumulators and c not in helpers]
        select = [*firsts, *kept, *[quote_ident(c) for c in accumulators]]
        result: pa.Table = finisher.sql(f"SELECT {', '.join(select)} FROM state").to_arrow_table()
    return result


def estimate_column(accumulator: str) -> str:
    return f"{accumulator}__estimate"


def hll_estimates(sketches: pa.ChunkedArray) -> pa.Array:
    """Each APPROX_COUNT_DISTINCT sketch's estimate, as Spark's ``hll_sketch_estimate`` gives it
    (``Math.round`` of the sketch's estimate). DuckDB has no HLL of this format, so the finished
    column would be missing; the sketches are Apache DataSketches HLL sketches, which the
    ``datasketches`` library (Apache's own, for Python) reads, without Spark."""
    import datasketches

    return pa.array(
        [
            None if s is None else math.floor(datasketches.hll_sketch.deserialize(s).get_estimate() + 0.5)
            for s in sketches.to_pylist()
        ],
        pa.int64(),
    )


def naive_utc(table: pa.Table) -> pa.Table:
    """Timestamps as the sinks and the catalog hold them: naive, in UTC (Spark writes the
    snapshot's Parquet with a UTC zone)."""
    fields = [
        pa.field(f.name, pa.timestamp(f.type.unit), f.nullable)
        if pa.types.is_timestamp(f.type) and f.type.tz is not None
        else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


def finish_columns(manifest: dict[str, Any], stage: str, state_columns: list[str]) -> list[tuple[str, str]]:
    """The job's output columns over ``stage`` as DuckDB SQL over its state columns: each layer of
    the branch after the stage (Spark SQL in the plan), the later ones written over the earlier
    ones' expressions. Columns the state already holds by name, and columns that need more than
    the state, are left out."""
    layers: list[dict[str, Any]] = []
    for branch in manifest.get("plan", {}).get("branches", []):
        if (branch.get("stage") or {}).get("name") == stage:
            layers = list(branch.get("layers") or [])
        for step in branch.get("before") or ():  # a stage of a chain: the layers to the next stage
            if step["stage"]["name"] == stage:
                layers = list(step["layers"])
    known: dict[str, exp.Expression | None] = {c.lower(): exp.column(c, quoted=True) for c in state_columns}
    for layer in layers:
        level: dict[str, exp.Expression | None] = {}
        for column in layer["columns"]:
            level[str(column["name"]).lower()] = _over(str(column["sql"]), known)
        known = level
    taken = {c.lower() for c in state_columns}
    out: list[tuple[str, str]] = []
    for layer in layers[-1:]:
        for column in layer["columns"]:
            expression = known.get(str(column["name"]).lower())
            if expression is not None and str(column["name"]).lower() not in taken:
                out.append((str(column["name"]), expression.sql(dialect="duckdb")))
    return out


def _over(spark_sql: str, known: dict[str, exp.Expression | None]) -> exp.Expression | None:
    """``spark_sql`` with each column replaced by its expression in ``known``; None when it names
    a column ``known`` lacks (or cannot hold)."""
    try:
        tree = sqlglot.parse_one(spark_sql, read="spark")
    except sqlglot.errors.ParseError:
        return None
    missing = False

    def swap(node: exp.Expression) -> exp.Expression:
        nonlocal missing
        if (
            isinstance(node, exp.Anonymous)
            and node.name.lower() == "hll_sketch_estimate"
            and len(node.expressions) == 1
            and isinstance(node.expressions[0], exp.Column)
        ):  # computed beside the sketches (hll_estimates): DuckDB has no such function
            node = exp.column(estimate_column(node.expressions[0].name))
        if isinstance(node, exp.Column):
            found = known.get(node.name.lower())
            if found is None:
                missing = True
                return node
            return found.copy() if isinstance(found, exp.Column) else exp.Paren(this=found.copy())
        return node

    swapped = tree.transform(swap)
    return None if missing else swapped


def resolve(sql: str, catalog: Catalog) -> tuple[str, dict[str, pa.Table]]:
    """Step 3. ``sql`` with each call replaced by the name of a table, and the tables by name,
    for the caller to register on the connection that runs the query (:func:`register`) and
    to forget when its rows are read. CatalogError naming an unknown snapshot (and the snapshots
    there are) or stage."""
    found = calls(sql) if mentions(sql) else []
    tables: dict[str, pa.Table] = {}
    names: dict[tuple[str, str], str] = {}
    for call in found:
        key = (call.snapshot.lower(), call.stage.lower())
        if key in names:
            continue
        snapshot = catalog.get_snapshot(call.snapshot)
        if snapshot is None:
            known = catalog.snapshot_names()
            listed = ", ".join(f"'{n}'" for n in sorted(known)) or "none yet"
            raise UnknownObjectError(
                f"unknown snapshot '{call.snapshot}'{close_name(call.snapshot, known)} in "
                f"{FUNCTION}(...); snapshots: {listed} (SHOW SNAPSHOTS lists them)"
            )
        names[key] = f"__pitstop_state_{next(_names)}"
        tables[names[key]] = state_table(snapshot, call.stage)
    out, last = [], 0
    for call in found:
        out += [sql[last : call.start], names[(call.snapshot.lower(), call.stage.lower())]]
        last = call.end
    out.append(sql[last:])
    return "".join(out), tables


def register(cursor: duckdb.DuckDBPyConnection, tables: dict[str, pa.Table]) -> list[str]:
    """Register :func:`resolve`'s tables on ``cursor``; returns their names."""
    for name, table in tables.items():
        cursor.register(name, table)
    return list(tables)


def forget(cursor: duckdb.DuckDBPyConnection, names: list[str]) -> None:
    """Unregister the tables :func:`resolve` registered."""
    import duckdb

    for name in names:
        try:
            cursor.unregister(name)
        except duckdb.Error:
            pass
