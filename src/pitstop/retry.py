"""Try an operation again while it fails for a reason that passes (a server away, a broker not
answering): the one retry loop, used by the sinks that wait for their server
(:mod:`pitstop.connectors.postgres.sink`, :mod:`pitstop.connectors.kafka.sink`).

What counts as passing is the caller's: the exception classes it names. The caller also says
what a failure does meanwhile (close a connection, say why the job waits) and how it waits: a
sink passes its stop event's ``wait``, so that stopping the run ends the wait at once, and its
operation refuses to start once the run is stopping. Tests pass a ``sleep`` and a ``clock`` that
only record, so nothing sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Backoff", "retry"]

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)


@dataclass(frozen=True)
class Backoff:
    """The waits between attempts: ``first_s``, then each ``factor`` times the one before, at most
    ``max_s``."""

    first_s: float
    max_s: float
    factor: float = 2.0

    def delays(self) -> Iterator[float]:
        """``first_s``, ``first_s * factor``, ... up to ``max_s``, then ``max_s`` for ever."""
        delay = self.first_s
        while True:
            yield delay
            delay = min(delay * self.factor, self.max_s)


def retry(
    operation: Callable[[], T],
    *,
    transient: type[E] | tuple[type[E], ...],
    backoff: Backoff,
    on_transient: Callable[[E], object] | None = None,
    attempts: int | None = None,
    deadline: float | None = None,
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``operation()``'s result, calling it again after a wait for as long as it raises one of
    ``transient``.

    1. Call ``operation``. Its result is returned; an exception that is not ``transient``
       propagates at once.
    2. A ``transient`` exception is given to ``on_transient`` (clean up, say why the job waits).
    3. Give up, raising that exception, when ``attempts`` calls have been made or when the next
       call would start after ``deadline`` (a ``clock()`` time); None: no such limit.
    4. ``sleep`` the next of ``backoff``'s delays, then go to step 1.
    """
    delays = backoff.delays()
    made = 0
    while True:
        # Step 1.
        try:
            return operation()
        except transient as exc:
            made += 1
            # Step 2.
            if on_transient is not None:
                on_transient(exc)
            # Step 3.
            delay = next(delays)
            if attempts is not None and made >= attempts:
                raise
            if deadline is not None and clock() + delay > deadline:
                raise
        # Step 4.
        sleep(delay)
