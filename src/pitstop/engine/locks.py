"""Locks by name: statements about the same job, snapshot or mapping run one after the other;
statements about different names run side by side.

Two clients creating the same job at once: the second waits for the first, then finds the job
and gets a clear error, instead of both starting Spark queries for one name.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager

__all__ = ["NameLocks"]


class NameLocks:
    """A lock per ``(kind, lower-case name)``, created on first use. Several names are always
    taken in sorted order, so two statements that need the same names cannot deadlock."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[tuple[str, str], threading.RLock] = {}

    def _lock(self, key: tuple[str, str]) -> threading.RLock:
        with self._guard:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = threading.RLock()
            return lock

    @contextmanager
    def hold(self, names: Iterable[tuple[str, str]]) -> Iterator[None]:
        keys = sorted({(kind, name.lower()) for kind, name in names})
        with ExitStack() as stack:
            for key in keys:
                stack.enter_context(self._lock(key))
            yield
