"""A source's rows stamped with their micro-batch and the watermark Spark drops late rows by in it,
and, for a source with partitions (Kafka), the partition each row was read from (step 1 of
:mod:`pitstop.engine.late`).

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
PART = "__pitstop_part"
HIDDEN = (BATCH, WATERMARK, PART)
"""The columns a stamped source adds after the mapping's, all BIGINT: :data:`PART` only for a
source with partitions (:attr:`pitstop.connectors.base.Connector.partitioned`)."""
CHECKPOINT_OPTION = "late_checkpoint"


def hidden_fields(partitioned: bool) -> list[StructField]:
    fields = [StructField(BATCH, LongType(), False), StructField(WATERMARK, LongType(), False)]
    return fields + ([StructField(PART, LongType(), True)] if partitioned else [])


def source_partition(partition: InputPartition) -> int | None:
    """The partition of its source a connector's input partition reads (its attribute
    ``source_partition``; Kafka: the partition number); None if it does not say."""
    part = getattr(partition, "source_partition", None)
    return None if part is None else int(part)


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
    def __init__(self, inner: InputPartition, batch: int, watermark_ms: int, part: int | None) -> None:
        super().__init__(None)
        self.inner = inner
        self.batch = batch
        self.watermark_ms = watermark_ms
        self.part = part


class StampedReader(DataSourceStreamReader):
    """The inner reader's rows with :data:`HIDDEN` appended (:data:`PART` if ``partitioned``);
    everything else is the inner's."""

    def __init__(self, inner: DataSourceStreamReader, ckpt: str, partitioned: bool) -> None:
        self.inner = inner
        self.checkpoint = ckpt
        self.partitioned = partitioned

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
        inner = self.inner.partitions(start, end)
        return [StampedPartition(p, batch, watermark, source_partition(p)) for p in inner]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, StampedPartition)
        names = list(HIDDEN if self.partitioned else HIDDEN[:2])
        for batch in self.inner.read(partition.inner):
            assert isinstance(batch, pa.RecordBatch), type(batch)
            n = batch.num_rows
            stamps = [
                pa.array([partition.batch] * n, pa.int64()),
                pa.array([partition.watermark_ms] * n, pa.int64()),
            ]
            if self.partitioned:
                stamps.append(pa.array([partition.part] * n, pa.int64()))
            yield pa.RecordBatch.from_arrays([*batch.columns, *stamps], names=[*batch.schema.names, *names])

    def commit(self, end: dict[str, Any]) -> None:
        self.inner.commit(end)

    def stop(self) -> None:
        self.inner.stop()


def stamped(base: type[DataSource], name: str, partitioned: bool) -> type[DataSource]:
    """``base`` registered as ``name``, reading through :class:`StampedReader`: its schema ends
    with :data:`HIDDEN` (without :data:`PART` unless ``partitioned``), and its option
    ``late_checkpoint`` names the query's checkpoint."""

    def stream_reader(self: DataSource, schema: StructType) -> DataSourceStreamReader:
        inner_schema = StructType([f for f in schema.fields if f.name not in HIDDEN])
        inner = base.streamReader(self, inner_schema)
        return StampedReader(inner, self.options[CHECKPOINT_OPTION], partitioned)

    return type(
        f"{base.__name__}_stamped_{len(name)}",
        (base,),
        {"name": classmethod(lambda cls, n=name: n), "streamReader": stream_reader},
    )
