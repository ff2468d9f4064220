"""Settings: declared once as data (name, default, help), frozen once resolved."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
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
        "Spark shuffle partitions; empty means the number of cores (this machine's in local mode, "
        "the executors' on a cluster)",
    ),
    Setting(
        "executor_memory",
        "PITSTOP_EXECUTOR_MEMORY",
        "1g",
        "memory of each executor on a cluster (spark.executor.memory); a worker with less starts none",
    ),
    Setting(
        "driver_memory",
        "PITSTOP_DRIVER_MEMORY",
        "2g",
        "memory of Spark's driver JVM (spark.driver.memory): in local mode, where state and batches live",
    ),
    Setting(
        "spark_ui",
        "PITSTOP_SPARK_UI",
        "auto",
        "Spark's web UI: on, off, or auto (on for a cluster, off in local mode)",
    ),
    Setting(
        "executor_wait_s",
        "PITSTOP_EXECUTOR_WAIT_S",
        "120",
        "seconds to wait, on a cluster, for the first executor to register before giving up",
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
    shuffle_partitions: int | None = None  # None: the cores (see :func:`is_local`)
    trigger_ms: int = 500
    trash_days: float | None = 7.0  # None: the trash is never emptied
    executor_memory: str = "1g"
    driver_memory: str = "2g"
    executor_wait_s: float = 120.0
    spark_ui: bool | None = None  # None: on for a cluster, off in local mode

    @property
    def ui(self) -> bool:
        return (not self.local) if self.spark_ui is None else self.spark_ui

    @property
    def local(self) -> bool:
        """Spark runs inside this process (``local``, ``local[4]``, ``local[*]``), not on a cluster."""
        return is_local(self.master)

    @classmethod
    def resolve(cls, home: str | os.PathLike[str] | None = None, master: str | None = None) -> Settings:
        """Explicit arguments win over environment variables, which win over defaults."""
        values = {s.name: os.environ.get(s.env, s.default) for s in SETTINGS}
        if home is not None:
            values["home"] = os.fspath(home)
        if master is not None:
            values["master"] = master
        partitions = values["shuffle_partitions"].strip()
        return cls(
            home=Path(values["home"]).expanduser().resolve(),
            master=values["master"].strip(),
            shuffle_partitions=_whole("PITSTOP_SHUFFLE_PARTITIONS", partitions) if partitions else None,
            trigger_ms=int(values["trigger_ms"]),
            trash_days=trash_days(values["trash_days"]),
            executor_memory=memory_size("PITSTOP_EXECUTOR_MEMORY", values["executor_memory"]),
            driver_memory=memory_size("PITSTOP_DRIVER_MEMORY", values["driver_memory"]),
            executor_wait_s=_whole("PITSTOP_EXECUTOR_WAIT_S", values["executor_wait_s"]),
            spark_ui=spark_ui(values["spark_ui"]),
        )


def spark_ui(value: str) -> bool | None:
    text = value.strip().lower()
    if text not in ("on", "off", "auto"):
        raise PitstopError(f"PITSTOP_SPARK_UI is {value!r}; it takes on, off or auto")
    return None if text == "auto" else text == "on"


def is_local(master: str) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]``: Spark inside the pitstop process."""
    return master.strip() == "local" or master.strip().startswith("local[")


def _whole(env: str, value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        number = 0
    if number <= 0:
        raise PitstopError(f"{env} is {value!r}; it takes a whole number > 0")
    return number


def memory_size(env: str, value: str) -> str:
    """``PITSTOP_EXECUTOR_MEMORY``, ``PITSTOP_DRIVER_MEMORY``: Spark's size notation (``512m``, ``2g``)."""
    text = value.strip().lower()
    if not re.fullmatch(r"[1-9][0-9]*[kmgt]?", text):
        raise PitstopError(f"{env} is {value!r}; it takes a size as Spark writes it, e.g. 512m or 2g")
    return text


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
