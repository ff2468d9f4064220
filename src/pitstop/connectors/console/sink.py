"""The Console sink: prints each batch (at-least-once; for demos)."""

from __future__ import annotations

import sys

import pyarrow as pa

from pitstop.catalog.rows import Mapping
from pitstop.connectors.values import naive_utc


class ConsoleSink:
    def __init__(self, mapping: Mapping, job: str) -> None:
        self.label = f"{job} -> {mapping.name}"

    def prepare(self, schema: list[tuple[str, str]]) -> None:
        return None

    def write(self, table: pa.Table, batch_id: int) -> None:
        if table.num_rows == 0:
            return
        rows = naive_utc(table).to_pylist()
        out = [f"-- {self.label}, batch {batch_id}: {len(rows)} row(s)"]
        for r in rows:  # a running aggregate's rows: a group no longer kept is shown as removed
            removed = r.pop("__pitstop_keep", True) is False
            out.append(("  removed: " if removed else "  ") + ", ".join(f"{k}={v}" for k, v in r.items()))
        sys.stdout.write("\n".join(out) + "\n")
        sys.stdout.flush()
