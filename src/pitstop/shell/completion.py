"""Completion of keywords, statement templates and catalog names.

The names come from a :class:`CatalogNames` snapshot that a background thread reloads after each
statement (:meth:`PitstopCompleter.refresh`), so typing never waits for the catalog.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from pitstop.connectors import registry
from pitstop.shell.syntax import ALL_KEYWORDS, NEXT_WORDS, STATEMENTS

if TYPE_CHECKING:
    from pitstop.catalog.store import Catalog

log = logging.getLogger(__name__)

MAPPING_OPTIONS = registry.option_names()  # every mapping type's declared options
_WORD = re.compile(r"[\\\w.']*$")
_WORDS = re.compile(r"[A-Za-z_][\w]*|\(")
_STATE_ARGS = re.compile(
    r"snapshot_state\(\s*'(?P<snapshot>[^']*)(?:'\s*,\s*'(?P<stage>[^']*))?$", re.IGNORECASE
)
STATE_FUNCTION = "snapshot_state"


@dataclass(frozen=True)
class CatalogNames:
    """What completion knows about the catalog at one moment."""

    mappings: tuple[str, ...] = ()
    columns: dict[str, tuple[str, ...]] = field(default_factory=dict)  # mapping (lower) -> columns
    jobs: tuple[str, ...] = ()
    snapshots: tuple[str, ...] = ()
    stages: tuple[str, ...] = ()
    snapshot_stages: dict[str, tuple[str, ...]] = field(default_factory=dict)  # snapshot (lower) -> stages

    @classmethod
    def load(cls, catalog: Catalog) -> CatalogNames:
        from pitstop.plan.model import JobPlan

        mappings = catalog.mappings()
        jobs = catalog.jobs()
        stages: set[str] = set()
        for job in jobs:
            try:
                stages.update(s.name for s in JobPlan.from_json(catalog.get_run(job.run_id).plan).stages)
            except Exception:  # noqa: BLE001 - a plan completion cannot read is just not offered
                log.debug("no stages for job '%s'", job.name, exc_info=True)
        return cls(
            snapshot_stages=catalog.snapshot_stages(),
            mappings=tuple(m.name for m in mappings),
            columns={m.name.lower(): tuple(c.name for c in m.columns) for m in mappings},
            jobs=tuple(j.name for j in jobs),
            snapshots=tuple(catalog.snapshot_names()),
            stages=tuple(sorted(stages)),
        )

    @property
    def all_columns(self) -> tuple[str, ...]:
        return tuple(sorted({c for cols in self.columns.values() for c in cols}))


class PitstopCompleter(Completer):
    """Context-aware completion: job names after ``JOB``, snapshots after ``SNAPSHOT``, mappings
    after ``FROM``/``INTO``/``TABLE``, columns after ``mapping.``, option names inside
    ``OPTIONS (``, statement templates at the start of a statement, backslash commands."""

    def __init__(
        self,
        catalog: Catalog | None = None,
        special_commands: Iterable[str] = (),
        job_options: Iterable[str] = (),
    ) -> None:
        self.catalog = catalog
        self.names = CatalogNames()
        self.special_commands = tuple(sorted(special_commands))
        self.job_options = tuple(job_options)
        self._wanted = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    # -- background refresh ----------------------------------------------------------------------
    def refresh(self) -> None:
        """Reload the names from the catalog soon, on the refresher thread; returns at once."""
        if self.catalog is None:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._refresher, name="pitstop-completion", daemon=True)
            self._thread.start()
        self._wanted.set()

    def _refresher(self) -> None:
        while not self._stopped.is_set():
            self._wanted.wait()
            if self._stopped.is_set():
                return
            self._wanted.clear()
            try:
                assert self.catalog is not None
                self.names = CatalogNames.load(self.catalog)
            except Exception:  # noqa: BLE001 - stale names are better than a dead refresher
                log.debug("completion refresh failed", exc_info=True)

    def stop(self) -> None:
        self._stopped.set()
        self._wanted.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- completion ------------------------------------------------------------------------------
    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        before = document.text_before_cursor
        match = _WORD.search(before)
        word = match.group(0) if match else ""
        head = before[: len(before) - len(word)]
        statement = head.rsplit(";", 1)[-1]
        if statement.lstrip().startswith("\\"):
            yield from self._special(statement.lstrip(), word)
            return
        if not statement.strip():
            if word.startswith("\\") or not word:
                yield from _matching(word, self.special_commands, "command")
            if not word.startswith("\\"):
                yield from self._templates(word, word)
                yield from self._keywords(word)
            return
        yield from self._in_statement(statement, word)

    def _special(self, statement: str, word: str) -> Iterator[Completion]:
        command = statement.split()[0] if statement.split() else ""
        if not statement.strip():
            yield from _matching(word, self.special_commands, "command")
        elif command == "\\d":
            names = self.names
            yield from _matching(word, names.mappings, "mapping")
            yield from _matching(word, names.jobs, "job")
            yield from _matching(word, names.snapshots, "snapshot")
        elif command in ("\\help", "\\?", "\\h"):
            yield from _matching(word, sorted({s.name.split()[-1] for s in STATEMENTS}), "statement")

    def _templates(self, typed: str, word: str) -> Iterator[Completion]:
        """Statement templates for what was typed of the statement so far (``CREATE J``)."""
        wanted = " ".join(typed.upper().split()) + (" " if typed.endswith(" ") else "")
        for stmt in STATEMENTS:
            if word and stmt.name.startswith(wanted) and stmt.template.rstrip(";") != stmt.name:
                yield Completion(
                    stmt.template,
                    start_position=-len(typed),
                    display=stmt.name + " ...",
                    display_meta="template",
                )

    def _keywords(self, word: str) -> Iterator[Completion]:
        if not word:
            return
        lower = word[:1].islower()
        for kw in ALL_KEYWORDS:
            if kw.startswith(word.upper()):
                yield Completion(kw.lower() if lower else kw, -len(word), display_meta="keyword")

    def _in_statement(self, statement: str, word: str) -> Iterator[Completion]:
        names = self.names
        inside = _STATE_ARGS.search(statement + word)
        if inside is not None:  # snapshot_state('snapshot', 'stage')
            if inside.group("stage") is None:
                yield from _matching(word, [f"'{n}'" for n in names.snapshots], "snapshot")
            else:
                stages = names.snapshot_stages.get(inside.group("snapshot").lower(), ())
                yield from _matching(word, [f"'{n}'" for n in stages], "stage")
            return
        raw = _WORDS.findall(statement)
        tokens = [t.upper() for t in raw]
        previous = tokens[-1] if tokens else ""
        before_previous = tokens[-2] if len(tokens) > 1 else ""
        if len(tokens) <= 2:
            yield from self._templates(statement.lstrip() + word, word)
        if previous in NEXT_WORDS and len(tokens) <= 3:
            lower = word[:1].islower() if word else raw[-1][:1].islower()
            words = [w.lower() if lower else w for w in NEXT_WORDS[previous]]
            yield from _matching(word, words, "keyword")
            return
        if "." in word:
            table, _, _column = word.rpartition(".")
            columns = names.columns.get(table.lower(), ())
            yield from _matching(word, [f"{table}.{c}" for c in columns], "column")
            return
        if _inside_options(statement):
            options = self.job_options if "JOB" in tokens[:3] else MAPPING_OPTIONS
            yield from _matching(word.lstrip("'"), [f"'{o}'" for o in options], "option", len(word))
            return
        if previous == "JOB":
            if before_previous != "CREATE" and "IF" not in tokens[-3:]:
                yield from _matching(word, names.jobs, "job")
            return
        if previous == "SNAPSHOT" and before_previous in ("FROM", "DROP", "DESCRIBE"):
            yield from _matching(word, names.snapshots, "snapshot")
            return
        if previous in ("FROM", "INTO", "TABLE", "JOIN") or (
            previous == "MAPPING" and before_previous in ("DROP", "EXISTS")
        ):
            yield from _matching(word, names.mappings, "mapping")
            if previous in ("FROM", "JOIN"):
                yield from _matching(word, [f"{STATE_FUNCTION}('"], "a snapshot's state")
            if previous == "FROM":
                yield from self._keywords(word)
            return
        if previous == "(" and before_previous == "STAGE":
            yield from _matching(word, names.stages, "stage")
            return
        if not word:
            return
        used = {t.lower() for t in tokens}
        in_use = [c for m, cols in names.columns.items() if m in used for c in cols]
        yield from _matching(word, sorted(set(in_use or names.all_columns)), "column")
        yield from _matching(word, names.mappings, "mapping")
        yield from _matching(word, names.jobs, "job")
        yield from self._keywords(word)


def _matching(
    word: str, candidates: Iterable[str], meta: str, replace: int | None = None
) -> Iterator[Completion]:
    lower = word.lower()
    for candidate in candidates:
        if candidate.lower().startswith(lower) or candidate.lower().lstrip("'").startswith(lower):
            yield Completion(
                candidate,
                start_position=-(len(word) if replace is None else replace),
                display_meta=meta,
            )


def _inside_options(statement: str) -> bool:
    """Whether the cursor is inside ``OPTIONS ( ... )`` at a key position (not after ``=``)."""
    upper = statement.upper()
    at = upper.rfind("OPTIONS")
    if at < 0:
        return False
    rest = statement[at + len("OPTIONS") :]
    if "(" not in rest or ")" in _outside_quotes(rest):
        return False
    tail = _outside_quotes(rest).rstrip()
    return tail.endswith("(") or tail.endswith(",")


def _outside_quotes(text: str) -> str:
    """``text`` with quoted parts removed (an open quote removes the rest)."""
    return re.sub(r"'[^']*('|$)", "", text)
