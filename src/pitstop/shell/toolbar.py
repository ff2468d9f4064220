"""The bottom toolbar: Spark's state and each job's state and input rate, refreshed once a second
by a background thread so that drawing the prompt never waits for Spark or the catalog."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from prompt_toolkit.formatted_text import StyleAndTextTuples

log = logging.getLogger(__name__)
REFRESH_S = 1.0


@dataclass(frozen=True)
class JobStatus:
    name: str
    status: str
    rows_per_s: float


class LiveStatus:
    """Polls ``source`` (``Manager.live_status``) every second; :meth:`fragments` renders the last
    answer. ``spark_state`` tells whether Spark is off, starting or up."""

    def __init__(
        self,
        source: Callable[[], list[tuple[str, str, float]]],
        spark_state: Callable[[], str],
        editing_mode: Callable[[], str],
    ) -> None:
        self._source = source
        self._spark_state = spark_state
        self._editing_mode = editing_mode
        self.jobs: tuple[JobStatus, ...] = ()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="pitstop-toolbar", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _poll(self) -> None:
        while not self._stopped.is_set():
            try:
                self.jobs = tuple(JobStatus(*row) for row in self._source())
            except Exception:  # noqa: BLE001 - the toolbar must outlive a failed poll
                log.debug("live status failed", exc_info=True)
            self._stopped.wait(REFRESH_S)

    def fragments(self) -> StyleAndTextTuples:
        out: StyleAndTextTuples = [("class:bottom-toolbar.dim", f" Spark: {self._spark_state()} ")]
        if not self.jobs:
            out.append(("class:bottom-toolbar.dim", "| no jobs "))
        for job in self.jobs[:6]:
            style = {"RUNNING": "running", "FAILED": "failed"}.get(job.status, "stopped")
            out.append(("class:bottom-toolbar", f"| {job.name} "))
            out.append((f"class:bottom-toolbar.{style}", job.status))
            if job.status == "RUNNING":
                out.append(("class:bottom-toolbar", f" {job.rows_per_s:,.0f} rows/s"))
            out.append(("class:bottom-toolbar", " "))
        if len(self.jobs) > 6:
            out.append(("class:bottom-toolbar.dim", f"| +{len(self.jobs) - 6} more "))
        out.append(("class:bottom-toolbar.dim", f"| [F4] {self._editing_mode()}  \\help "))
        return out
