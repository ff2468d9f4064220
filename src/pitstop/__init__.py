"""pitstop: a SQL-first manager for streaming jobs on Apache Spark."""

from __future__ import annotations

__version__ = "0.1.0"
