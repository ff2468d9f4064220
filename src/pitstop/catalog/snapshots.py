"""Snapshots in the catalog: where each one's state is, its size, and its manifest."""

from __future__ import annotations

import json
from typing import Any

import duckdb

from pitstop.catalog.base import CatalogBase
from pitstop.catalog.rows import Snapshot, dumps


class SnapshotStore(CatalogBase):
    """Snapshots and their listings (SHOW SNAPSHOTS, completion)."""

    _SNAPSHOT_COLUMNS = "name, job, created, path, size_bytes, rows, manifest"

    def get_snapshot(self, name: str) -> Snapshot | None:
        row = (
            self.cursor()
            .execute(
                f"SELECT {self._SNAPSHOT_COLUMNS} FROM pitstop.snapshots WHERE lower(name) = lower(?)",
                [name],
            )
            .fetchone()
        )
        return None if row is None else _snapshot(row)

    def snapshots(self) -> list[Snapshot]:
        rows = (
            self.cursor()
            .execute(f"SELECT {self._SNAPSHOT_COLUMNS} FROM pitstop.snapshots ORDER BY created, name")
            .fetchall()
        )
        return [_snapshot(r) for r in rows]

    def snapshot_names(self) -> list[str]:
        """Snapshot names only (for completion and suggestions; no manifest is read)."""
        return [row[3] for row in self.snapshot_listing()]

    def snapshot_stages(self) -> dict[str, tuple[str, ...]]:
        """Each snapshot's stage names (snapshot name, lower-case -> stages), for completion of
        ``snapshot_state('s', 'stage')``; only the manifests' stage keys are read."""
        rows = (
            self.cursor()
            .execute("SELECT name, json_keys(manifest, '$.stages') FROM pitstop.snapshots")
            .fetchall()
        )
        return {str(n).lower(): tuple(sorted(k or ())) for n, k in rows}

    def snapshot_listing(self) -> list[tuple[Any, ...]]:
        """``(created, size_bytes, job, name, rows)`` of every snapshot, without the manifests
        (what SHOW SNAPSHOTS prints; parsing 1,000 manifests would cost more than the query)."""
        return list(self._cached("snapshot_listing", self._read_snapshot_listing))

    def _read_snapshot_listing(self) -> tuple[tuple[Any, ...], ...]:
        return tuple(
            self.cursor()
            .execute(
                "SELECT created, size_bytes, job, name, rows FROM pitstop.snapshots ORDER BY created, name"
            )
            .fetchall()
        )

    def add_snapshot(self, snap: Snapshot, tx: duckdb.DuckDBPyConnection) -> None:
        tx.execute(
            f"INSERT INTO pitstop.snapshots ({self._SNAPSHOT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [snap.name, snap.job, snap.created, snap.path, snap.size_bytes, snap.rows, dumps(snap.manifest)],
        )

    def drop_snapshot(self, name: str, tx: duckdb.DuckDBPyConnection | None = None) -> None:
        if tx is not None:
            tx.execute("DELETE FROM pitstop.snapshots WHERE lower(name) = lower(?)", [name])
            return
        with self.transaction() as own:
            own.execute("DELETE FROM pitstop.snapshots WHERE lower(name) = lower(?)", [name])


def _snapshot(row: tuple[Any, ...]) -> Snapshot:
    return Snapshot(row[0], row[1], row[2], row[3], int(row[4]), int(row[5]), json.loads(row[6]))
