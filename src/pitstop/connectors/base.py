"""The connector seam: what one mapping type declares, in one place.

A mapping type (``TYPE File``, ``TYPE Generator``, ...) is one package ``connectors/<type>/``: its
``connector.py`` holds a :class:`Connector` (listed once in :mod:`pitstop.connectors.registry`),
beside its source and sink modules. It declares:

- its **options** (:class:`Option`: name, kind, default, help). The same declaration checks
  ``CREATE MAPPING`` (an unknown option is an error with did-you-mean, a wrong value names the
  option and what it accepts), completes option names in the shell, and writes ``\\help CREATE
  MAPPING`` and the README's table (a test holds the README to it);
- whether it is a **source**, a **sink**, or both;
- for a source: the Python streaming data source that reads it, what it offers right now (the
  target of ``AWAIT JOB``), and how its **position** is written into a snapshot and given back to
  a run restored from it. Positions are opaque to the rest of pitstop: a :class:`Positions`
  object says how two of a connector's positions compare and combine (the fence of ``DROP JOB
  ... WITH SNAPSHOT`` and the progress checks only use that);
- for a sink: how a branch's micro-batches are written, exactly once; and how what a job's runs
  wrote after a snapshot's cut is found and rolled back (:mod:`pitstop.connectors.rollback`).

Modules keep their heavy imports (pyspark, pyarrow) inside the methods that need them, so that
the catalog, the dialect and the shell can read declarations without starting anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import pyarrow as pa

from pitstop import dsn
from pitstop.errors import PlanError, UnknownOptionError
from pitstop.intervals import text_micros
from pitstop.spelling import close_name, closest

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSource

    from pitstop.catalog.rows import ColumnDef, Mapping
    from pitstop.catalog.store import Catalog
    from pitstop.connectors.rollback import SinkRollback, Span

OPTION_KINDS = ("text", "path", "choice", "boolean", "positive", "count", "timestamp", "interval")


@dataclass(frozen=True)
class Option:
    """One option of a mapping type, as ``OPTIONS ('name'='value')`` takes it.

    Kinds: ``text`` (any string), ``path`` (a folder; stored absolute), ``choice`` (one of
    ``choices``, any case; stored as declared), ``boolean`` (true/false), ``positive`` (a number
    > 0), ``count`` (a whole number > 0), ``timestamp`` (``YYYY-MM-DD HH:MM:SS``, UTC),
    ``interval`` (a length of time as ``INTERVAL '...'`` writes it: ``'5 minutes'``, ``'30
    seconds'``; ``choices`` are words it takes besides, e.g. ``off``)."""

    name: str
    help: str
    kind: str = "text"
    default: str | None = None
    choices: tuple[str, ...] = ()
    required: bool = False

    def __post_init__(self) -> None:
        assert self.kind in OPTION_KINDS, self.kind
        assert self.kind != "choice" or self.choices, self.name
        assert not self.choices or self.kind in ("choice", "interval"), self.name

    def accepts(self) -> str:
        """What the option takes, in words (for errors, ``\\help`` and the README)."""
        return {
            "text": "text",
            "path": "a folder",
            "choice": " | ".join(self.choices),
            "boolean": "true | false",
            "positive": "a number > 0",
            "count": "a whole number > 0",
            "timestamp": "a time 'YYYY-MM-DD HH:MM:SS' (UTC)",
            "interval": " | ".join(("an interval ('30 seconds', '5 minutes')", *self.choices)),
        }[self.kind]

    def normalize(self, where: str, value: str) -> str:
        """The value as stored, or PlanError naming the option and what it accepts."""
        wrong = PlanError(f"{where}: option '{self.name}' is '{value}'; it takes {self.accepts()}")
        text = value.strip()
        if self.kind == "path":
            if not text:
                raise wrong
            return str(Path(text).expanduser().absolute())
        if self.kind == "choice":
            for choice in self.choices:
                if choice.lower() == text.lower():
                    return choice
            raise wrong
        if self.kind == "boolean":
            if text.lower() not in ("true", "false"):
                raise wrong
            return text.lower()
        if self.kind in ("positive", "count"):
            try:
                number = float(text) if self.kind == "positive" else int(text)
            except ValueError:
                raise wrong from None
            if not number > 0:
                raise wrong
            return text
        if self.kind == "interval":
            for choice in self.choices:
                if choice.lower() == text.lower():
                    return choice
            if text_micros(text) is None:
                raise wrong
            return text
        if self.kind == "timestamp":
            try:
                datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                raise wrong from None
            return text
        return value


class Positions:
    """How a connector's positions compare and combine; a position is any JSON value.

    This one is a count (files read from the discovery log, events generated): the fence of
    ``DROP JOB ... WITH SNAPSHOT`` is the furthest any branch planned, and a branch has caught
    up with a target once its position is at least the target."""

    zero: Any = 0

    def furthest(self, a: Any, b: Any) -> Any:
        return max(int(a), int(b))

    def least(self, a: Any, b: Any) -> Any:
        """The nearer of two positions (what is available, held at a fence)."""
        return min(int(a), int(b))

    def covers(self, position: Any, target: Any) -> bool:
        """``position`` has read everything up to ``target``."""
        return int(position) >= int(target)

    def same(self, a: Any, b: Any) -> bool:
        """Two positions stand at the same place (each covers the other)."""
        return self.covers(a, b) and self.covers(b, a)

    def text(self, position: Any, unit: str) -> str:
        return f"{int(position):,} {unit}"


COUNT = Positions()


class Connector:
    """One mapping type. Subclasses set the class attributes and the methods of their roles."""

    type_name: ClassVar[str]  # as written in TYPE ..., e.g. "File"
    summary: ClassVar[str]  # one line for \help and the README
    options: ClassVar[tuple[Option, ...]] = ()
    source: ClassVar[bool] = False
    sink: ClassVar[bool] = False
    upserts: ClassVar[bool] = False
    """As a sink, it replaces rows by key: a running aggregate may write it (its rows change as
    input arrives). A sink that only appends refuses one when the job is planned."""
    partitioned: ClassVar[bool] = False
    """As a source, each input partition of its stream reader reads one partition of the source,
    which it names in its attribute ``source_partition`` (an int: Kafka's partition number): late
    rows are counted per partition (:mod:`pitstop.engine.late`). A File source's input partitions
    are chunks of the micro-batch's files, which say nothing of the input: it has none."""
    positions: ClassVar[Positions] = COUNT
    position_unit: ClassVar[str] = "events"  # what a position counts, e.g. "files"
    whole: ClassVar[str] = ""
    """How the static side of a join reads it whole, again every micro-batch: ``"catalog"`` (a
    table in the home's DuckDB file, published for each micro-batch), ``"files"`` (read where it
    lies), or ``""``: it cannot be read whole."""
    passthrough: ClassVar[str] = ""
    """If set, an option with a dotted name that is not declared (``'security.protocol'``) is
    kept as written and handed to the type's client library; this says so in ``\\help`` and the
    README. A dotted name close to a declared one still gets did-you-mean; the type's
    :meth:`check_mapping` may check such names further."""

    @property
    def key(self) -> str:
        """The lower-case name the catalog stores (``Mapping.type``)."""
        return self.type_name.lower()

    def roles(self) -> str:
        return " and ".join(r for r, on in (("source", self.source), ("sink", self.sink)) if on)

    # -- CREATE MAPPING ----------------------------------------------------------------------------
    def check_options(self, mapping: str, given: dict[str, str]) -> dict[str, str]:
        """The options as stored: each one declared, each value checked and normalized, defaults
        of required-looking options left to the readers (only what the user wrote is stored)."""
        where = f"mapping '{mapping}' (TYPE {self.type_name})"
        declared = {o.name.lower(): o for o in self.options}
        out: dict[str, str] = {}
        for key, value in given.items():
            option = declared.get(key.lower())
            if option is None and self.passed_through(key):
                out[key] = value
                continue
            if option is None:
                raise UnknownOptionError(f"{where}: unknown option '{key}'{self._suggest(key)}", subject=key)
            out[option.name] = option.normalize(where, value)
        for option in self.options:
            if option.required and option.name not in out:
                raise PlanError(
                    f"mapping '{mapping}': TYPE {self.type_name} needs OPTIONS ('{option.name}'='...'): "
                    f"{option.help}"
                )
        return out

    def passed_through(self, key: str) -> bool:
        """An undeclared option this type hands to its client library as it is (see
        :attr:`passthrough`): a dotted name not within a typo of a declared option."""
        if not self.passthrough or "." not in key.strip(".") or key != key.strip():
            return False
        return not closest(key, [o.name for o in self.options], cutoff=0.85, fold=str.lower)

    def passed_options(self, mapping: Mapping) -> dict[str, str]:
        """A stored mapping's options that go to the client library as they are."""
        declared = {o.name for o in self.options}
        return {k: v for k, v in mapping.options.items() if k not in declared}

    def cluster_folder(self, mapping: Mapping) -> Path | None:
        """A folder the executors of a cluster must see to read the mapping (checked when a job
        starts there); None if it has none."""
        return None

    def sink_keys(self, catalog: Any, mapping: Mapping, ask_server: bool) -> tuple[str, ...] | None:
        """The key columns of the sink's table, as an early-results job made it (a primary key
        and a history of the rows it replaced), or None: the table has none, or this type keeps
        no such table. ``ask_server`` False: a type whose table is on a server does not ask it."""
        return None

    def _suggest(self, key: str) -> str:
        close = close_name(key, [o.name for o in self.options])
        if close:
            return close
        if not self.options:
            return f"; TYPE {self.type_name} takes no options"
        return f"; TYPE {self.type_name} takes {', '.join(repr(o.name) for o in self.options)}"

    def shown_options(self, options: dict[str, str]) -> dict[str, str]:
        """The options as ``SHOW MAPPINGS`` and ``\\d`` print them: passwords in connection strings
        and options named like a secret (``sasl.password``) masked (:mod:`pitstop.dsn`)."""
        return dsn.mask_options(options)

    def check_mapping(self, mapping: str, columns: tuple[ColumnDef, ...], options: dict[str, str]) -> None:
        """Rules beyond single options (e.g. a generator needs columns); PlanError if broken."""

    def option(self, mapping: Mapping, name: str) -> str | None:
        """An option's value for a stored mapping: as given, else the declared default."""
        if name in mapping.options:
            return mapping.options[name]
        return next((o.default for o in self.options if o.name == name), None)

    def created(self, mapping: Mapping) -> str | None:
        """Called once a mapping is stored (e.g. a File mapping makes its folder); what CREATE
        MAPPING should say besides, if anything."""
        return None

    # -- a source ------------------------------------------------------------------------------------
    def stream_source(self) -> type[DataSource]:
        raise NotImplementedError(f"TYPE {self.type_name} is not a source")

    def reader_options(self, mapping: Mapping, start: Any) -> dict[str, str]:
        """The options the stream source receives (besides source, run_dir and parallelism)."""
        raise NotImplementedError(f"TYPE {self.type_name} is not a source")

    def available(self, run_dir: Path, mapping: Mapping, start: Any) -> Any:
        """The position this source reaches once it has read everything there is now."""
        raise NotImplementedError(f"TYPE {self.type_name} is not a source")

    def save_position(
        self, run_dir: Path, mapping: Mapping, position: Any, snapshot_dir: Path
    ) -> dict[str, Any]:
        """Write what a restored run needs to go on from ``position`` into the snapshot's folder;
        return the manifest's entry for this source (its ``type`` and ``pos`` are added)."""
        return {}

    def resume_from(self, entry: dict[str, Any], mapping: Mapping) -> tuple[dict[str, Any], str]:
        """Where a job restored from a snapshot starts reading ``mapping``, given the snapshot's
        ``entry`` for it: the entry :meth:`resume` will get (its ``pos`` is the start), and what
        ``EXPLAIN`` says about it."""
        read = self.positions.text(entry["pos"], self.position_unit)
        return entry, f"goes on from the snapshot's position ({read} read)"

    def resume(self, entry: dict[str, Any], snapshot_dir: Path, run_dir: Path, source: str) -> None:
        """Prepare a fresh run's folder to go on from a snapshot's ``entry`` for ``source``."""

    def replayable(self, mapping: Mapping, start: Any, end: Any) -> Replayable:
        """What of the input from ``start`` to ``end`` (positions a job read) the source still
        holds, for a replay (``EXPLAIN ANALYZE``): by default all of it."""
        return Replayable(end)

    def for_replay(self, mapping: Mapping) -> Mapping:
        """The mapping as a replay's reader gets it: one that reads past what
        :meth:`replayable` found missing instead of failing on it. By default as it is."""
        return mapping

    def lag(self, source_dir: Path, mapping: Mapping, position: Any) -> str | None:
        """How far a run that has committed ``position`` is behind what the source offers, in
        words (``SHOW JOBS``, ``DESCRIBE JOB``), from what the run keeps in ``source_dir``; never
        a request to an outside system. None: this type does not tell."""
        return None

    def lag_records(self, source_dir: Path, mapping: Mapping, position: Any) -> dict[str, int] | None:
        """What :meth:`lag` says in words, in numbers: records behind the end, per partition
        (``pitstop.metrics``, the metrics endpoint). None: this type does not tell, or does not
        know now (a broker that does not answer)."""
        return None

    # -- a sink --------------------------------------------------------------------------------------
    def make_sink(
        self,
        catalog: Catalog,
        mapping: Mapping,
        job: str,
        run_id: str,
        branch: int,
        keys: tuple[str, ...] = (),
    ) -> Sink:
        """The writer of one branch; ``keys`` non-empty (only where :attr:`upserts`): it replaces
        rows by these columns, and removes the rows a batch marks as no longer kept."""
        raise NotImplementedError(f"TYPE {self.type_name} is not a sink")

    # -- rolling a sink back to a snapshot's cut (pitstop.connectors.rollback) -------------------
    def rollback_plan(
        self, catalog: Catalog, home: Path, mapping: Mapping, spans: tuple[Span, ...], job: str
    ) -> SinkRollback:
        """What ``job``'s runs wrote to this sink in ``spans`` (the batches after a snapshot's cut),
        and what rolling it back takes: rows to remove, files to move aside, and for a sink that
        upserts (running aggregates, whose sink keeps before-images per run and batch) the keys
        whose value at the cut is written back (``restores``). Also what other jobs wrote to the
        same sink, which is never touched. Reads only; EXPLAIN shows it.

        This default: a type that keeps no record of what each batch wrote cannot be rolled back."""
        from pitstop.connectors.rollback import SinkRollback

        return SinkRollback(
            mapping.name,
            self.type_name,
            spans,
            possible=False,
            note=f"TYPE {self.type_name} keeps no record of what each batch wrote; it is not rolled back",
        )

    def rollback_in_catalog(self, catalog: Catalog, mapping: Mapping, plan: SinkRollback, tx: Any) -> None:
        """Roll the sink back inside the catalog transaction ``tx`` that creates the restored job
        (a DuckDB sink: its rows and bookkeeping of the plan's spans, checked against the plan's
        counts; an upsert sink restores each key's value at the cut here). PitstopError if the
        sink no longer holds what the plan counted: the transaction, and the job, are rolled back."""

    def rollback_outside(
        self, catalog: Catalog, home: Path, mapping: Mapping, plan: SinkRollback, trash: Path
    ) -> None:
        """Roll the sink back outside the catalog, after the transaction that created the restored
        job and before its queries start (a File sink: files to ``trash``). Must be idempotent: a
        process killed half way leaves it to the next one, which calls it again."""


@dataclass(frozen=True)
class Replayable:
    """What a replay can read of a source's span (:meth:`Connector.replayable`): up to ``end``
    (the span's end, or less), and ``missing``, one sentence per part of the span the source no
    longer holds (``topic 'orders' partition 1: ...``); none when it holds all of it."""

    end: Any
    missing: tuple[str, ...] = ()


class Sink(Protocol):
    def prepare(self, schema: list[tuple[str, str]]) -> None: ...

    def write(self, table: pa.Table, batch_id: int) -> None: ...
