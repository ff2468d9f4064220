"""``TYPE Console``: prints each micro-batch to the manager's standard output (at least once;
for demos)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pitstop.connectors.base import Connector

if TYPE_CHECKING:
    from pitstop.catalog.rows import Mapping
    from pitstop.catalog.store import Catalog
    from pitstop.connectors.base import Sink


class ConsoleConnector(Connector):
    type_name = "Console"
    summary = "prints each batch (for demos)"
    sink = True
    upserts = True  # prints a running aggregate's changed rows (and the removed ones, so marked)

    def make_sink(
        self,
        catalog: Catalog,
        mapping: Mapping,
        job: str,
        run_id: str,
        branch: int,
        keys: tuple[str, ...] = (),
    ) -> Sink:
        from pitstop.connectors.console.sink import ConsoleSink

        return ConsoleSink(mapping, job)


CONNECTOR = ConsoleConnector()
