"""A failed Spark query in words: the one sentence a person reads, the whole text for the log,
whether a source's own refusal failed it (no restart helps), and whether its checkpoint may have."""

from __future__ import annotations

import re
from typing import Any

from pitstop.errors import FINAL_SOURCE_ERRORS

# Spark's failures of a query that a checkpoint it was started on can cause: its offsets, commits,
# operators or state do not fit the query.
CHECKPOINT_FAILURE = re.compile(
    r"checkpoint|state ?store|state schema|StateSchema|STATEFUL_OPERATOR|operator ?id|metadata",
    re.IGNORECASE,
)


def full_text(exc: Any) -> str:
    """Everything a Spark error says, the JVM's stack trace included, for the log."""
    parts = [str(getattr(exc, "desc", None) or exc)]
    trace = getattr(exc, "_stackTrace", None)
    if isinstance(trace, str) and trace:
        parts.append(trace)
    return "\n".join(parts)


def rejected_record(exc: Any) -> bool:
    """Whether a query failed because a source met what it must fail on (a malformed record
    under ``'onError'='fail'``, data loss under ``'onDataLoss'='fail'``): no restart changes it."""
    text = str(getattr(exc, "desc", None) or exc)
    return any(f"{kind.__name__}: " in text for kind in FINAL_SOURCE_ERRORS)


_PYTHON_RAISED = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning))(?::\s*(.*))?$")


def spark_reason(exc: Any) -> str:
    """What went wrong, in one sentence a person reads: a source's own words about a malformed
    record; the exception a Python worker raised (not Spark's "An exception was thrown from the
    Python worker"); otherwise Spark's error class and message, with the SQL it points at."""
    text = str(getattr(exc, "desc", None) or exc).split("=== Streaming Query ===")[0]
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:  # a source's own words ('onError'='fail', 'onDataLoss'='fail')
        for final in FINAL_SOURCE_ERRORS:
            _, marker, words = ln.partition(f"{final.__name__}: ")
            if marker:
                return words.strip()
    first = lines[0].strip() if lines else "unknown error"
    if any("Traceback (most recent call last)" in ln for ln in lines):
        raised = [m for m in (_PYTHON_RAISED.match(ln.strip()) for ln in lines) if m]
        if raised:
            kind, said = raised[-1].group(1), raised[-1].group(2) or ""
            if kind.startswith("pyspark.") and said.startswith("["):
                first = said  # Spark's own error, passed through Python (a sink's foreachBatch)
            else:
                first = f"the Python worker raised {kind.rsplit('.', 1)[-1]}: {said}".rstrip(": ")
    first = re.sub(r"\s*SQLSTATE: \w+$", "", first)
    if first.startswith("[") and "== SQL" in text:  # the expression Spark points at
        after = text.split("== SQL", 1)[1].splitlines()
        if len(after) > 1 and after[1].strip():
            first += f" (in: {after[1].strip()})"
    return first[:500]
