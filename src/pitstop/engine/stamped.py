"""A source's rows stamped with their micro-batch and the watermark Spark drops late rows by in it
(step 1 of :mod:`pitstop.engine.late`).

A wrapper around any connector's stream reader: the query's own registration of the source
(:func:`pitstop.engine.frames.source_format`) reads through it when the branch counts late rows.
Imported by Spark's Python processes (the driver's source runner and the workers), so it imports
pyspark at module level, as the connectors' source modules do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import LongType, StructField, StructType

from pitstop.engine import checkpoint

BATCH = "__pitstop_batch"
WATERMARK = "__pitstop_wm"
HIDDEN = (BATCH, WATERMARK)
"""The columns a stamped source adds after the mapping's, both BIGINT."""
CHECKPOINT_OPTION = "late_checkpoint"


def hidden_fields() -> list[StructField]:
    return [StructField(BATCH, LongType(), False), StructField(WATERMARK, LongType(), False)]


def late_watermark(ckpt: Path) -> tuple[int, int]:
    """The micro-batch Spark is planning (its offsets are written before its partitions are
    asked for) and the watermark, in ms, that its stateful operators drop late rows by: the
    previous batch's (``offsets/<n-1>``; pyspark 4.3's ``PropagateWatermarkSimulator`` judges late
    events of batch n by the watermark of batch n - 1, also when a restarted query runs batch n
    again); 0 for a run's first batch."""
    planned = checkpoint.latest_planned(ckpt)
    if planned is None or planned == 0:
        return (planned or 0), 0
    previous = checkpoint.read_offsets(ckpt, planned - 1)
    return planned, (0 if previous is None else previous.watermark_ms)


class StampedPartition(InputPartition):
    def __init__(self, inner: InputPartition, batch: int, watermark_ms: int) -> None:
        super().__init__(None)
        self.inner = inner
        self.batch = batch
        self.watermark_ms = watermark_ms


class StampedReader(DataSourceStreamReader):
    """The inner reader's rows with :data:`HIDDEN` appended; everything else is the inner's."""

    def __init__(self, inner: DataSourceStreamReader, ckpt: str) -> None:
        self.inner = inner
        self.checkpoint = ckpt

    def initialOffset(self) -> dict[str, Any]:
        return self.inner.initialOffset()

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        return self.inner.latestOffset(start, limit)  # type: ignore[arg-type]

    def getDefaultReadLimit(self) -> Any:
        return self.inner.getDefaultReadLimit()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return self.inner.reportLatestOffset()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        batch, watermark = late_watermark(Path(self.checkpoint))
        return [StampedPartition(p, batch, watermark) for p in self.inner.partitions(start, end)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, StampedPartition)
        for batch in self.inner.read(partition.inner):
            assert isinstance(batch, pa.RecordBatch), type(batch)
            n = batch.num_rows
            yield pa.RecordBatch.from_arrays(
                [
                    *batch.columns,
                    pa.array([partition.batch] * n, pa.int64()),
                    pa.array([partition.watermark_ms] * n, pa.int64()),
                ],
                names=[*batch.schema.names, *HIDDEN],
            )

    def commit(self, end: dict[str, Any]) -> None:
        self.inner.commit(end)

    def stop(self) -> None:
        self.inner.stop()


def stamped(base: type[DataSource], name: str) -> type[DataSource]:
    """``base`` registered as ``name``, reading through :class:`StampedReader`: its schema ends
    with :data:`HIDDEN`, and its option ``late_checkpoint`` names the query's checkpoint."""

    def stream_reader(self: DataSource, schema: StructType) -> DataSourceStreamReader:
        inner_schema = StructType([f for f in schema.fields if f.name not in HIDDEN])
        inner = base.streamReader(self, inner_schema)
        return StampedReader(inner, self.options[CHECKPOINT_OPTION])

    return type(
        f"{base.__name__}_stamped_{len(name)}",
        (base,),
        {"name": classmethod(lambda cls, n=name: n), "streamReader": stream_reader},
    )
