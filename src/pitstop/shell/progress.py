"""A one-line progress display for statements that take a while: what runs, for how long, and
how to stop waiting. Drawn on a terminal only, and only after a short delay."""

from __future__ import annotations

import time
from typing import TextIO

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
DELAY_S = 0.5


class Progress:
    def __init__(self, label: str, stream: TextIO, delay_s: float = DELAY_S) -> None:
        first = label.strip().split("\n", 1)[0]
        self.label = first if len(first) <= 48 else first[:47] + "…"
        self.stream = stream
        self.delay_s = delay_s
        self.started = time.monotonic()
        self.hint = "Ctrl-C stops waiting"
        self._ticks = 0
        self._shown = False
        self._enabled = stream.isatty()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def tick(self) -> None:
        if not self._enabled or self.elapsed < self.delay_s:
            return
        self._ticks += 1
        spin = SPINNER[self._ticks % len(SPINNER)]
        self.stream.write(f"\r\x1b[K{spin} {self.label}  {self.elapsed:.1f} s  ({self.hint})")
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False
