"""Settings: declared once as data (name, default, help), frozen once resolved."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pitstop.errors import PitstopError


def whole(what: str, value: str) -> int:
    """A whole number > 0 (``what`` names the variable or setting in the error)."""
    try:
        number = int(value.strip())
    except ValueError:
        number = 0
    if number <= 0:
        raise PitstopError(f"{what} is {value!r}; it takes a whole number > 0")
    return number


def memory_size(what: str, value: str) -> str:
    """Spark's size notation (``512m``, ``2g``)."""
    text = value.strip().lower()
    if not re.fullmatch(r"[1-9][0-9]*[kmgt]?", text):
        raise PitstopError(f"{what} is {value!r}; it takes a size as Spark writes it, e.g. 512m or 2g")
    return text


def spark_ui(what: str, value: str) -> bool | None:
    text = value.strip().lower()
    if text not in ("on", "off", "auto"):
        raise PitstopError(f"{what} is {value!r}; it takes on, off or auto")
    return None if text == "auto" else text == "on"


def trash_days(what: str, value: str) -> float | None:
    """A number of days > 0, or ``never``."""
    text = value.strip().lower()
    if text == "never":
        return None
    try:
        days = float(text)
    except ValueError:
        days = -1.0
    if not days > 0 or days == float("inf"):
        raise PitstopError(
            f"{what} is {value!r}; it takes a number of days > 0 (e.g. 7, or 0.5 for "
            "12 hours), or 'never' to keep the trash"
        )
    return days


def _partitions(what: str, value: str) -> int | None:
    return whole(what, value) if value.strip() else None


def _home(what: str, value: str) -> Path:
    return Path(value).expanduser().resolve()


def _text(what: str, value: str) -> str:
    return value.strip()


@dataclass(frozen=True)
class Setting:
    name: str
    env: str
    default: str
    help: str
    parse: Callable[[str, str], Any] = _text
    """``(what, text) -> value``: the typed value, or a PitstopError naming ``what``."""


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "home",
        "PITSTOP_HOME",
        "./pitstop-home",
        "folder holding catalog.duckdb, sink tables, checkpoints and snapshots",
        _home,
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
        _partitions,
    ),
    Setting(
        "executor_memory",
        "PITSTOP_EXECUTOR_MEMORY",
        "1g",
        "memory of each executor on a cluster (spark.executor.memory); a worker with less starts none",
        memory_size,
    ),
    Setting(
        "driver_memory",
        "PITSTOP_DRIVER_MEMORY",
        "2g",
        "memory of Spark's driver JVM (spark.driver.memory): in local mode, where state and batches live",
        memory_size,
    ),
    Setting(
        "spark_ui",
        "PITSTOP_SPARK_UI",
        "auto",
        "Spark's web UI: on, off, or auto (on for a cluster, off in local mode)",
        spark_ui,
    ),
    Setting(
        "executor_wait_s",
        "PITSTOP_EXECUTOR_WAIT_S",
        "120",
        "seconds to wait, on a cluster, for the first executor to register before giving up",
        whole,
    ),
    Setting(
        "trigger_ms",
        "PITSTOP_TRIGGER_MS",
        "500",
        "how often a job looks for new input, in milliseconds",
        whole,
    ),
    Setting(
        "metrics_s",
        "PITSTOP_METRICS_S",
        "10",
        "how often, in seconds, the running jobs are sampled into pitstop.metrics (and the metrics endpoint)",
        whole,
    ),
    Setting(
        "metrics_keep",
        "PITSTOP_METRICS_KEEP",
        "360",
        "how many samples pitstop.metrics keeps; older ones are removed (360 at 10 s: the last hour)",
        whole,
    ),
    Setting(
        "trash_days",
        "PITSTOP_TRASH_DAYS",
        "7",
        "days an entry of <home>/trash/ is kept; opening the home removes older ones ('never': keep all)",
        trash_days,
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
    metrics_s: int = 10
    metrics_keep: int = 360

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
        raw = {s.name: os.environ.get(s.env, s.default) for s in SETTINGS}
        if home is not None:
            raw["home"] = os.fspath(home)
        if master is not None:
            raw["master"] = master
        return cls(**{s.name: s.parse(s.env, raw[s.name]) for s in SETTINGS})


def parse(name: str, value: str, what: str) -> Any:
    """A setting's value parsed as its declaration says (``SET 'trigger_ms' = ...`` too)."""
    return next(s for s in SETTINGS if s.name == name).parse(what, value)


def is_local(master: str) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]``: Spark inside the pitstop process."""
    return master.strip() == "local" or master.strip().startswith("local[")
