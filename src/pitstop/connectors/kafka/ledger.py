"""What lets the Kafka sink write a batch once: the ledger kept beside the branch's checkpoint, the
headers that name each record's run, branch and batch, and the producer's ``transactional.id``."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

LEDGER = "kafka-sink.json"
HEADERS = ("pitstop.job", "pitstop.run", "pitstop.branch", "pitstop.batch", "pitstop.seq", "pitstop.count")


def transactional_id(job: str, sink: str, branch: int) -> str:
    """The producer's ``transactional.id``: the same for every run of a job's branch into a sink
    (a resumed or restored run fences the producers of the runs before it)."""
    return f"pitstop.{job}.{sink}.{branch}"


@dataclass
class Ledger:
    """What the sink last did, kept beside the branch's checkpoint."""

    written: int | None = None  # the last batch wholly written
    writing: int | None = None  # the batch in flight (None once written)
    start: dict[str, int] = field(
        default_factory=dict
    )  # partition -> offset the batch in flight starts at or after

    @classmethod
    def load(cls, path: Path) -> Ledger:
        if not path.exists():
            return cls()
        data = json.loads(path.read_text())
        return cls(
            data.get("written"), data.get("writing"), {str(k): int(v) for k, v in data["start"].items()}
        )

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        with open(tmp, "w") as handle:
            json.dump({"written": self.written, "writing": self.writing, "start": self.start}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
