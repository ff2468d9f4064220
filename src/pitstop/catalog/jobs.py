"""Jobs and their runs in the catalog: a job's statement, status and options, each run's plan and
restore, the last batch each branch of a run committed, and which runs write a sink."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import duckdb

from pitstop.catalog.base import CatalogBase
from pitstop.catalog.clock import now
from pitstop.catalog.rows import Job, Run, dumps
from pitstop.errors import CatalogError


class JobStore(CatalogBase):
    """Jobs, runs and the sink bookkeeping of runs."""

    _JOB_COLUMNS = "name, sql, status, detail, run_id, snapshot, created, updated, options"

    def get_job(self, name: str) -> Job | None:
        row = (
            self.cursor()
            .execute(f"SELECT {self._JOB_COLUMNS} FROM pitstop.jobs WHERE lower(name) = lower(?)", [name])
            .fetchone()
        )
        return None if row is None else _job(row)

    def listed_job(self, name: str) -> Job | None:
        """The job of that name as committed, from the listing read once per change (for
        read-only statements that many clients send: DESCRIBE JOB; not inside a transaction,
        whose own writes it would not see)."""
        key = name.lower()
        return next((j for j in self.jobs() if j.name.lower() == key), None)

    def listed_run(self, run_id: str) -> Run:
        """:meth:`get_run`, read once per change (the same use as :meth:`listed_job`)."""
        run: Run = self._cached(f"run {run_id}", lambda: self.get_run(run_id))
        return run

    def jobs(self) -> list[Job]:
        return list(self._cached("jobs", self._read_jobs))

    def _read_jobs(self) -> tuple[Job, ...]:
        rows = (
            self.cursor()
            .execute(f"SELECT {self._JOB_COLUMNS} FROM pitstop.jobs ORDER BY created, name")
            .fetchall()
        )
        return tuple(_job(r) for r in rows)

    def create_job(
        self, job: Job, run: Run, also: Callable[[duckdb.DuckDBPyConnection], None] | None = None
    ) -> None:
        """Record a job and its run in one transaction, with ``also`` (a sink rollback) in it."""
        with self.transaction() as tx:
            tx.execute(
                "INSERT INTO pitstop.runs VALUES (?, ?, ?, ?, ?, ?)",
                [
                    run.run_id,
                    run.job,
                    run.folder,
                    dumps(run.plan),
                    None if run.restore is None else dumps(run.restore),
                    run.started,
                ],
            )
            tx.execute(
                f"INSERT INTO pitstop.jobs ({self._JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    job.name,
                    job.sql,
                    job.status,
                    job.detail,
                    job.run_id,
                    job.snapshot,
                    job.created,
                    job.updated,
                    dumps(job.options),
                ],
            )
            if also is not None:
                also(tx)

    def set_job_status(self, name: str, status: str, detail: str = "") -> None:
        with self.transaction() as tx:
            tx.execute(
                "UPDATE pitstop.jobs SET status = ?, detail = ?, updated = ? WHERE lower(name) = lower(?)",
                [status, detail, now(), name],
            )

    def set_job_options(self, name: str, options: dict[str, str]) -> None:
        with self.transaction() as tx:
            tx.execute(
                "UPDATE pitstop.jobs SET options = ?, updated = ? WHERE lower(name) = lower(?)",
                [dumps(options), now(), name],
            )

    def delete_job(self, name: str, tx: duckdb.DuckDBPyConnection | None = None) -> None:
        if tx is not None:
            tx.execute("DELETE FROM pitstop.jobs WHERE lower(name) = lower(?)", [name])
            return
        with self.transaction() as own:
            own.execute("DELETE FROM pitstop.jobs WHERE lower(name) = lower(?)", [name])

    def get_run(self, run_id: str) -> Run:
        row = (
            self.cursor()
            .execute(
                "SELECT run_id, job, folder, plan, restore, started FROM pitstop.runs WHERE run_id = ?",
                [run_id],
            )
            .fetchone()
        )
        if row is None:
            raise CatalogError(f"run '{run_id}' is missing from the catalog {self.path}")
        return Run(
            row[0], row[1], row[2], json.loads(row[3]), None if row[4] is None else json.loads(row[4]), row[5]
        )

    def all_runs(self) -> list[Run]:
        """Every run of every job, oldest first."""
        rows = (
            self.cursor()
            .execute("SELECT run_id, job, folder, plan, restore, started FROM pitstop.runs ORDER BY started")
            .fetchall()
        )
        return [
            Run(r[0], r[1], r[2], json.loads(r[3]), None if r[4] is None else json.loads(r[4]), r[5])
            for r in rows
        ]

    def runs_after(self, job: str, run_id: str) -> list[Run]:
        """The runs of ``job`` (any case) started after run ``run_id``, oldest first."""
        rows = (
            self.cursor()
            .execute(
                "SELECT run_id, job, folder, plan, restore, started FROM pitstop.runs "
                "WHERE lower(job) = lower(?) AND run_id <> ? "
                "AND started > (SELECT started FROM pitstop.runs WHERE run_id = ?) ORDER BY started",
                [job, run_id, run_id],
            )
            .fetchall()
        )
        return [
            Run(r[0], r[1], r[2], json.loads(r[3]), None if r[4] is None else json.loads(r[4]), r[5])
            for r in rows
        ]

    def end_run(self, run_id: str, batches: dict[int, int | None], tx: duckdb.DuckDBPyConnection) -> None:
        """Record the last batch each branch of a run committed (its folder is about to go)."""
        tx.execute(
            "INSERT OR REPLACE INTO pitstop.run_ends VALUES (?, ?, ?)",
            [run_id, dumps({str(k): v for k, v in batches.items()}), now()],
        )

    def run_end(self, run_id: str) -> dict[int, int | None] | None:
        """What :meth:`end_run` recorded for a run, or None."""
        row = (
            self.cursor()
            .execute("SELECT batches FROM pitstop.run_ends WHERE run_id = ?", [run_id])
            .fetchall()
        )
        if not row:
            return None
        return {int(k): (None if v is None else int(v)) for k, v in json.loads(row[0][0]).items()}

    def run_ends(self) -> dict[str, dict[int, int | None]]:
        """:meth:`run_end` of every run that has one."""
        rows = self.cursor().execute("SELECT run_id, batches FROM pitstop.run_ends").fetchall()
        return {
            r[0]: {int(k): (None if v is None else int(v)) for k, v in json.loads(r[1]).items()} for r in rows
        }

    def runs_writing(self, sink: str) -> list[tuple[str, str, int]]:
        """``(job, run_id, branch)`` of every run's branch whose plan writes the sink mapping."""
        rows = self.cursor().execute("SELECT job, run_id, plan FROM pitstop.runs").fetchall()
        out = []
        for job, run_id, plan in rows:
            for b in json.loads(plan).get("branches", []):
                if str(b.get("sink", "")).lower() == sink.lower():
                    out.append((str(job), str(run_id), int(b["index"])))
        return out

    # -- sink bookkeeping ------------------------------------------------------------------------
    def last_sink_batch(self, run_id: str, branch: int) -> int | None:
        row = (
            self.cursor()
            .execute(
                "SELECT max(batch_id) FROM pitstop.sink_batches WHERE run_id = ? AND branch = ?",
                [run_id, branch],
            )
            .fetchone()
        )
        return None if row is None or row[0] is None else int(row[0])


def _job(row: tuple[Any, ...]) -> Job:
    name, sql, status, detail, run_id, snapshot, created, updated, options = row
    return Job(name, sql, status, detail, run_id, snapshot, created, updated, json.loads(options or "{}"))
