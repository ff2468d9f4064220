"""``TYPE Generator``: a deterministic synthetic stream for demos, tests and load.

Event ``i`` is a pure function of ``i`` (:mod:`pitstop.connectors.generator.source` says how columns
are filled), so a position is a count of events and a job restored at ``i`` sees exactly the
events an uninterrupted job would have seen. Nothing but the count goes into a snapshot.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pitstop.connectors.base import Connector, Option
from pitstop.errors import PlanError

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSource

    from pitstop.catalog.rows import ColumnDef, Mapping


class GeneratorConnector(Connector):
    type_name = "Generator"
    summary = "a deterministic stream of events, generated from the declared columns"
    source = True
    options = (
        Option("rate", "events per second of wall-clock time", "positive", "100"),
        Option("limit", "stop after this many events (default: never)", "count"),
        Option("keys", "distinct values of each string column", "count", "10"),
        Option("start", "event time of the first event", "timestamp", "2024-01-01 00:00:00"),
        Option("step_ms", "event-time spacing in milliseconds (default: 1000 / rate)", "positive"),
        Option("max_per_batch", "at most this many events per micro-batch (default: no limit)", "count"),
    )

    def check_mapping(self, mapping: str, columns: tuple[ColumnDef, ...], options: dict[str, str]) -> None:
        if not columns:
            raise PlanError(f"mapping '{mapping}': a Generator mapping needs columns to generate")

    def stream_source(self) -> type[DataSource]:
        from pitstop.connectors.generator.source import GeneratorSource

        return GeneratorSource

    def reader_options(self, mapping: Mapping, start: Any) -> dict[str, str]:
        return dict(mapping.options, start_pos=str(int(start)))

    def available(self, run_dir: Path, mapping: Mapping, start: Any) -> Any:
        from pitstop.connectors.generator.source import generator_available

        return generator_available(run_dir, mapping.name, mapping.options, int(start))


CONNECTOR = GeneratorConnector()
