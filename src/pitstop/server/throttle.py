"""Failed-login throttling: an address that keeps sending wrong passwords is refused for a while.

Each failed password (a wrong SCRAM proof or md5 answer, an unknown user, a malformed exchange)
from a client address is counted. After ``failures`` of them within ``window_s`` seconds, every
login from that address is refused, before any password is asked, for ``lockout_s`` seconds: a
right password too, or guessing would go on. A client that disconnects when asked for a password
(psql does, then prompts) has failed nothing. Successful logins are not counted and do not clear
the count; other addresses are never affected. The counts live in the server's memory: a restart
forgets them.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

MAX_ADDRESSES = 10_000
"""Addresses tracked at most; past it, the ones with nothing recent are forgotten."""


@dataclass(frozen=True)
class ThrottleSettings:
    failures: int = 10
    """Failed passwords from one address within ``window_s`` that lock it out."""
    window_s: float = 300.0
    lockout_s: float = 300.0
    """How long a locked-out address is refused."""


@dataclass
class _Address:
    failures: deque[float]
    locked_until: float = -math.inf


class LoginThrottle:
    """The failed logins of one server, by client address; safe from any thread. ``clock`` is
    monotonic seconds (tests pass their own)."""

    def __init__(
        self, settings: ThrottleSettings | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings or ThrottleSettings()
        self.clock = clock
        self._addresses: dict[str, _Address] = {}
        self._lock = threading.Lock()

    def refusal(self, address: str) -> str | None:
        """Why a login from ``address`` is refused now, or None when it may try."""
        with self._lock:
            entry = self._addresses.get(address)
            left = entry.locked_until - self.clock() if entry is not None else 0.0
        if left <= 0:
            return None
        s = self.settings
        return (
            f"too many failed logins from {address}: {s.failures} wrong passwords within "
            f"{s.window_s:g} s, so logins from this address are refused for {math.ceil(left)} s more; "
            "check the user name and password, then connect again after that"
        )

    def failed(self, address: str) -> None:
        """A login from ``address`` failed its password."""
        s = self.settings
        with self._lock:
            now = self.clock()
            entry = self._addresses.get(address)
            if entry is None:
                if len(self._addresses) >= MAX_ADDRESSES:
                    self._forget_quiet(now)
                entry = self._addresses[address] = _Address(deque())
            entry.failures.append(now)
            while entry.failures and entry.failures[0] <= now - s.window_s:
                entry.failures.popleft()
            if len(entry.failures) < s.failures:
                return
            entry.failures.clear()
            entry.locked_until = now + s.lockout_s
        log.warning(
            "%d failed logins from %s within %g s: refusing its logins for %g s",
            s.failures,
            address,
            s.window_s,
            s.lockout_s,
        )

    def _forget_quiet(self, now: float) -> None:
        quiet = [
            a
            for a, e in self._addresses.items()
            if e.locked_until <= now and (not e.failures or e.failures[-1] <= now - self.settings.window_s)
        ]
        if len(quiet) < len(self._addresses) // 2:  # (many addresses at work: keep the locked ones)
            quiet = [a for a, e in self._addresses.items() if e.locked_until <= now]
        for address in quiet:
            del self._addresses[address]
