"""What one statement's :class:`~pitstop.server.outcome.Outcome` sends: its notices and changed
parameters, then an EmptyQueryResponse, a COPY's CopyOutResponse, CopyData and CopyDone, or a
RowDescription (when asked) and its DataRows, value by value or as Arrow batches
(:mod:`pitstop.server.bulk`); then the command tag, or PortalSuspended when an Execute's row limit
leaves rows for the next one.
"""

from __future__ import annotations

import struct

from pygwire.messages import (
    CommandComplete,
    CopyDone,
    CopyOutResponse,
    EmptyQueryResponse,
    FieldDescription,
    ParameterStatus,
    PortalSuspended,
    RowDescription,
)

from pitstop.server.bulk import RowEncoder
from pitstop.server.outcome import Outcome
from pitstop.server.pgtypes import Column, encode
from pitstop.server.wire import Wire


def send_outcome(
    wire: Wire, outcome: Outcome, binary: list[bool] | None, max_rows: int, describe: bool
) -> bool:
    """Notices, rows (up to ``max_rows`` when > 0) and the command tag; False when the portal
    is suspended with rows left."""
    for notice in outcome.notices:
        wire.notice(notice)
    outcome.notices = []
    for name, value in outcome.parameter_changes:
        wire.send(ParameterStatus(name=name, value=value))
    outcome.parameter_changes = []
    if outcome.tag == "EMPTY":
        wire.send(EmptyQueryResponse())
        return True
    if outcome.copy is not None:
        return _send_copy(wire, outcome)
    columns = outcome.columns
    if columns is not None:
        if describe:
            wire.send(row_description(columns, binary))
        flags = binary or [False] * len(columns)
        types = [c.type for c in columns]
        sent = 0
        while True:
            if outcome.batches is not None:
                return _send_batches(wire, outcome, max_rows, sent)
            for row in outcome.rows:
                wire.send_raw(
                    data_row(
                        [encode(v, t, b, outcome.zone) for v, t, b in zip(row, types, flags, strict=False)]
                    )
                )
                outcome.count += 1
                sent += 1
                if max_rows and sent >= max_rows:
                    wire.send(PortalSuspended())
                    return False
            if outcome.more is None:
                break
            encoder = (
                RowEncoder.of(outcome.duckdb_types, types, flags, outcome.zone) if outcome.arrow else None
            )
            outcome.read_more(encoder)
    wire.send(CommandComplete(tag=outcome.final_tag()))
    return True


def _send_copy(wire: Wire, outcome: Outcome) -> bool:
    """COPY ... TO STDOUT: CopyOutResponse (text, every column), a CopyData per line, CopyDone
    and the tag. A row limit does not apply to COPY (as in PostgreSQL)."""
    assert outcome.copy is not None
    wire.send(CopyOutResponse(overall_format=0, col_formats=[0] * outcome.copy.width))
    for line in outcome.copy:
        wire.send_raw(b"d" + struct.pack(">i", len(line) + 4) + line)
    wire.send(CopyDone())
    wire.send(CommandComplete(tag=outcome.final_tag()))
    return True


def _send_batches(wire: Wire, outcome: Outcome, max_rows: int, sent: int) -> bool:
    """The rows of an outcome switched to Arrow batches (:func:`send_outcome`); ``sent`` rows of
    this Execute already went value by value."""
    assert outcome.batches is not None and outcome.encoder is not None
    while True:
        batch = outcome.pending if outcome.pending is not None else next(outcome.batches, None)
        outcome.pending = None
        if batch is None:
            break
        if max_rows and batch.num_rows > max_rows - sent:
            room = max_rows - sent
            outcome.pending = batch.slice(room)
            batch = batch.slice(0, room)
        wire.send_raw(outcome.encoder.encode(batch))
        outcome.count += batch.num_rows
        sent += batch.num_rows
        if max_rows and sent >= max_rows:
            wire.send(PortalSuspended())
            return False
    wire.send(CommandComplete(tag=outcome.final_tag()))
    return True


def data_row(values: list[bytes | None]) -> bytes:
    """One DataRow message of encoded values (None is SQL NULL)."""
    parts = [struct.pack(">h", len(values))]
    for v in values:
        if v is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(struct.pack(">i", len(v)))
            parts.append(v)
    body = b"".join(parts)
    return b"D" + struct.pack(">i", len(body) + 4) + body


def row_description(columns: tuple[Column, ...], binary: list[bool] | None) -> RowDescription:
    flags = binary or [False] * len(columns)
    return RowDescription(
        fields=[
            FieldDescription(
                name=c.name,
                table_oid=0,
                column_attr=0,
                type_oid=c.type.oid,
                type_size=c.type.size,
                type_modifier=c.type.modifier,
                format_code=1 if b else 0,
            )
            for c, b in zip(columns, flags, strict=False)
        ]
    )
