"""The Generator source: a deterministic synthetic stream for demos, tests and load.

Event ``i`` is a pure function of ``i``, so a job restored at position ``i`` sees exactly the events
an uninterrupted job would have seen. Columns are filled by declared type:

- the first integer column counts events (``i``); other integer columns are ``hash(i) % 1000``;
- TIMESTAMP columns are ``start + i * step_ms``;
- string columns are ``<column>_<hash(i) % keys>`` (``keys`` distinct values);
- DECIMAL/DOUBLE columns are ``(hash(i) % 10000) / 100``; BOOLEAN ``i`` is even.

Options: ``rate`` (events per second of wall-clock time, default 100), ``limit`` (stop after this
many events; default none), ``keys`` (default 10), ``start`` (first event time, default
``2024-01-01 00:00:00``), ``step_ms`` (event-time spacing, default ``1000 / rate``),
``max_per_batch`` (at most this many events per micro-batch; default no limit).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from pitstop.connectors import positions
from pitstop.plan.types import arrow_schema

_MASK = (1 << 63) - 1


def mix(i: int, salt: int) -> int:
    """A cheap deterministic hash (splitmix64)."""
    z = (i * 0x9E3779B97F4A7C15 + salt * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) & _MASK


class RangePartition(InputPartition):
    def __init__(self, lo: int, hi: int) -> None:
        self.lo = lo
        self.hi = hi


def parse_start(text: str) -> int:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1_000_000)


def generate(schema: pa.Schema, lo: int, hi: int, options: dict[str, str]) -> pa.RecordBatch:
    """Events ``lo <= i < hi`` as one record batch of ``schema``."""
    rate = float(options.get("rate", "100"))
    keys = int(options.get("keys", "10"))
    step_us = int(float(options.get("step_ms", str(1000.0 / rate))) * 1000)
    start_us = parse_start(options.get("start", "2024-01-01 00:00:00"))
    ids = range(lo, hi)
    arrays = []
    counted = False
    for n, field in enumerate(schema):
        t = field.type
        if pa.types.is_integer(t):
            if not counted:
                counted = True
                values: list[Any] = list(ids)
            else:
                values = [mix(i, n) % 1000 for i in ids]
        elif pa.types.is_timestamp(t):
            values = [start_us + i * step_us for i in ids]
            arrays.append(pa.array(values, pa.int64()).cast(t))
            continue
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            values = [f"{field.name}_{mix(i, n) % keys}" for i in ids]
        elif pa.types.is_decimal(t):
            values = [Decimal(mix(i, n) % 10000) / 100 for i in ids]
        elif pa.types.is_floating(t):
            values = [(mix(i, n) % 10000) / 100 for i in ids]
        elif pa.types.is_boolean(t):
            values = [i % 2 == 0 for i in ids]
        else:
            values = [None] * len(ids)
        arrays.append(pa.array(values, t))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class GeneratorStreamReader(DataSourceStreamReader):
    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.schema = schema
        self.options = options
        self.source = options["source"]
        self.state_dir = positions.source_dir(options["run_dir"], self.source)
        self.start = int(options.get("start_pos", "0"))
        self.rate = float(options.get("rate", "100"))
        self.limit = int(options["limit"]) if options.get("limit") else None
        self.parallelism = max(1, int(options.get("parallelism", "2")))
        self.max_per_batch = int(options["max_per_batch"]) if options.get("max_per_batch") else None

    def _clock_start(self) -> float:
        """Wall-clock time at which this run's generator started (kept in the run folder)."""
        path = self.state_dir / "clock"
        with positions.locked(self.state_dir):
            if not path.exists():
                path.write_text(repr(time.time()))
            return float(path.read_text())

    def available(self) -> int:
        started = self._clock_start()  # first: the first call writes the clock (elapsed >= 0)
        pos = self.start + int((time.time() - started) * self.rate)
        return pos if self.limit is None else min(pos, self.limit)

    def initialOffset(self) -> dict[str, Any]:
        return positions.offset(self.source, self.start)

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        pos = self.available()
        if self.max_per_batch is not None and start is not None:
            pos = min(pos, int(start["pos"]) + self.max_per_batch)
        return positions.offset(self.source, positions.bounded(self.state_dir, pos, start))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        lo, hi = int(start["pos"]), int(end["pos"])
        if hi <= lo:
            return []
        chunks = min(self.parallelism, hi - lo)
        step = -(-(hi - lo) // chunks)
        return [RangePartition(a, min(a + step, hi)) for a in range(lo, hi, step)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        schema = arrow_schema(self.schema)
        for lo in range(partition.lo, partition.hi, 50_000):
            yield generate(schema, lo, min(lo + 50_000, partition.hi), self.options)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: events are recomputed from their index."""


class GeneratorSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "pitstop_generator"

    def schema(self) -> str:
        raise ValueError("pitstop_generator needs the mapping's schema: pass it with .schema(...)")

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return GeneratorStreamReader(schema, dict(self.options))


def generator_available(run_dir: str | Path, source: str, options: dict[str, str], start: int) -> int:
    """What a generator source offers right now (used by AWAIT JOB for its target)."""
    opts = dict(options, source=source, run_dir=str(run_dir), start_pos=str(start))
    reader = GeneratorStreamReader(StructType(), opts)
    return reader.available()
