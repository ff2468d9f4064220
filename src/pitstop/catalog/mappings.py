"""Mappings in the catalog: their definitions, options masked, with the secrets kept beside the
catalog (:mod:`pitstop.catalog.secrets`) joined back in when read."""

from __future__ import annotations

import json

from pitstop.catalog import secrets
from pitstop.catalog.base import CatalogBase
from pitstop.catalog.clock import now
from pitstop.catalog.rows import Mapping, dumps


class MappingStore(CatalogBase):
    """CREATE, DROP and lookups of mappings."""

    def get_mapping(self, name: str) -> Mapping | None:
        # fetchall, not fetchone: a result left open on the thread's cursor makes DuckDB refuse
        # register() on it (a sink's batch) until the cursor runs something else.
        rows = (
            self.cursor()
            .execute("SELECT definition FROM pitstop.mappings WHERE lower(name) = lower(?)", [name])
            .fetchall()
        )
        row = rows[0] if rows else None
        return None if row is None else self.secrets.join(Mapping.from_json(json.loads(row[0])))

    def listed_mapping(self, name: str) -> Mapping | None:
        """The mapping of that name as committed, from the listing read once per change (the same
        use as :meth:`~pitstop.catalog.jobs.JobStore.listed_job`)."""
        key = name.lower()
        return next((m for m in self.mappings() if m.name.lower() == key), None)

    def mappings(self) -> list[Mapping]:
        return list(self._cached("mappings", self._read_mappings))

    def _read_mappings(self) -> tuple[Mapping, ...]:
        rows = self.cursor().execute("SELECT definition FROM pitstop.mappings ORDER BY name").fetchall()
        return tuple(self.secrets.join(Mapping.from_json(json.loads(r[0]))) for r in rows)

    def put_mapping(self, mapping: Mapping, replace: bool = False) -> None:
        """Store a mapping: its options masked in the catalog, the values the mask hid in the
        secrets file (written first: a crash between the two leaves a secret that the next open
        forgets, never a mapping without its password)."""
        shown, hidden = secrets.split(mapping)
        if hidden:
            self.secrets.put(mapping.name, hidden)
        with self.transaction() as tx:
            if replace:
                tx.execute("DELETE FROM pitstop.mappings WHERE lower(name) = lower(?)", [mapping.name])
            tx.execute(
                "INSERT INTO pitstop.mappings VALUES (?, ?, ?, ?)",
                [shown.name, shown.type, dumps(shown.to_json()), now()],
            )
        if not hidden:
            self.secrets.put(mapping.name, {})

    def drop_mapping(self, name: str) -> None:
        with self.transaction() as tx:
            tx.execute("DELETE FROM pitstop.mappings WHERE lower(name) = lower(?)", [name])
        self.secrets.put(name, {})
