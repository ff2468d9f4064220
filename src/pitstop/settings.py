"""Settings: declared once as data (name, default, help), frozen once resolved."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pitstop.errors import PitstopError


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
    Setting(
        "trash_days",
        "PITSTOP_TRASH_DAYS",
        "7",
        "days an entry of <home>/trash/ is kept; opening the home removes older ones ('never': keep all)",
    ),
)


@dataclass(frozen=True)
class Settings:
    """Resolved settings of one pitstop process."""

    home: Path
    master: str = "local[*]"
    shuffle_partitions: int = field(default_factory=lambda: os.cpu_count() or 2)
    trigger_ms: int = 500
    trash_days: float | None = 7.0  # None: the trash is never emptied

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
            trash_days=trash_days(values["trash_days"]),
        )


def trash_days(value: str) -> float | None:
    """``PITSTOP_TRASH_DAYS``: a number of days > 0, or ``never``."""
    text = value.strip().lower()
    if text == "never":
        return None
    try:
        days = float(text)
    except ValueError:
        days = -1.0
    if not days > 0 or days == float("inf"):
        raise PitstopError(
            f"PITSTOP_TRASH_DAYS is {value!r}; it takes a number of days > 0 (e.g. 7, or 0.5 for "
            "12 hours), or 'never' to keep the trash"
        )
    return days
