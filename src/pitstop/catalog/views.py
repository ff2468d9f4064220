"""Views in the catalog: a name and the SELECT it stands for."""

from __future__ import annotations

from pitstop.catalog.base import CatalogBase
from pitstop.catalog.rows import View


class ViewStore(CatalogBase):
    """CREATE, DROP and lookups of views."""

    def get_view(self, name: str) -> View | None:
        row = (
            self.cursor()
            .execute("SELECT name, sql, created FROM pitstop.views WHERE lower(name) = lower(?)", [name])
            .fetchone()
        )
        return None if row is None else View(*row)

    def views(self) -> list[View]:
        rows = self.cursor().execute("SELECT name, sql, created FROM pitstop.views ORDER BY name").fetchall()
        return [View(*r) for r in rows]

    def put_view(self, view: View, replace: bool = False) -> None:
        with self.transaction() as tx:
            if replace:
                tx.execute("DELETE FROM pitstop.views WHERE lower(name) = lower(?)", [view.name])
            tx.execute("INSERT INTO pitstop.views VALUES (?, ?, ?)", [view.name, view.sql, view.created])

    def drop_view(self, name: str) -> None:
        with self.transaction() as tx:
            tx.execute("DELETE FROM pitstop.views WHERE lower(name) = lower(?)", [name])
