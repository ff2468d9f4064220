"""Settings: declared once as data (name, default, help), frozen once resolved."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Setting:
    name: str
    env: str
    default: str
    help: str


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "home",
        "PITSTOP_HOME",
        "./pitstop-home",
        "folder holding catalog.duckdb, sink tables, checkpoints and snapshots",
    ),
    Setting(
        "master",
        "PITSTOP_SPARK_MASTER",
        "local[*]",
        "Spark master URL; local[*] runs Spark inside the pitstop process",
    ),
    Setting(
        "shuffle_partitions",
        "PITSTOP_SHUFFLE_PARTITIONS",
        "",
        "Spark shuffle partitions; empty means the number of cores",
    ),
    Setting(
        "trigger_ms", "PITSTOP_TRIGGER_MS", "500", "how often a job looks for new input, in milliseconds"
    ),
)


@dataclass(frozen=True)
class Settings:
    """Resolved settings of one pitstop process."""

    home: Path
    master: str = "local[*]"
    shuffle_partitions: int = field(default_factory=lambda: os.cpu_count() or 2)
    trigger_ms: int = 500

    @classmethod
    def resolve(cls, home: str | os.PathLike[str] | None = None, master: str | None = None) -> Settings:
        """Explicit arguments win over environment variables, which win over defaults."""
        values = {s.name: os.environ.get(s.env, s.default) for s in SETTINGS}
        if home is not None:
            values["home"] = os.fspath(home)
        if master is not None:
            values["master"] = master
        partitions = int(values["shuffle_partitions"] or (os.cpu_count() or 2))
        return cls(
            home=Path(values["home"]).expanduser().resolve(),
            master=values["master"],
            shuffle_partitions=partitions,
            trigger_ms=int(values["trigger_ms"]),
        )
