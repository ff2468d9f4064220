"""What planning reads names through: the catalog's mappings and views, and the CTEs of the INSERT
being planned."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

from pitstop.catalog.rows import Mapping

MappingLookup = Callable[[str], Mapping | None]
ViewLookup = Callable[[str], exp.Query | None]


@dataclass(frozen=True)
class Lookups:
    mappings: MappingLookup
    views: ViewLookup
    ctes: dict[str, tuple[str, exp.Select]] = field(default_factory=dict)  # the INSERT's, as declared
