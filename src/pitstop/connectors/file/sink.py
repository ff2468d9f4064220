"""The File sink: one file per ``(run, branch, batch)``, written to a hidden temp file and renamed,
so a replayed batch replaces its own file and readers never see half a file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa

from pitstop.catalog.rows import Mapping
from pitstop.connectors.values import json_value, naive_utc


class FileSink:
    def __init__(self, mapping: Mapping, run_id: str, branch: int) -> None:
        self.folder = Path(mapping.options["path"])
        self.format = mapping.options.get("format", "json").lower()
        self.run_id = run_id
        self.branch = branch

    def prepare(self, schema: list[tuple[str, str]]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)

    def write(self, table: pa.Table, batch_id: int) -> None:
        if table.num_rows == 0:
            return
        name = f"part-{self.run_id}-{self.branch}-{batch_id:06d}.{self.format}"
        tmp = self.folder / f".{name}.tmp"
        table = naive_utc(table)
        if self.format == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, tmp)
        elif self.format == "csv":
            import pyarrow.csv as pc

            pc.write_csv(table, tmp)
        else:
            with open(tmp, "w") as handle:
                for row in table.to_pylist():
                    handle.write(json.dumps(row, default=json_value) + "\n")
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, self.folder / name)
