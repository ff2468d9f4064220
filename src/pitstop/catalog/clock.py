"""The catalog's clock: the naive UTC time every catalog row is stamped with."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    """The catalog's clock: naive UTC."""
    return datetime.now(UTC).replace(tzinfo=None)
