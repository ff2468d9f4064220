"""CREATE MAPPING: the mapping's columns and their types, its WATERMARK clause, its type."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import TokenType

from pitstop.connectors import registry
from pitstop.sql import nodes
from pitstop.sql.parse_base import BaseParser
from pitstop.sql.words import did_you_mean, one_of

MAPPING_KINDS = registry.TYPE_NAMES  # the connectors' names (pitstop.connectors.registry)

_T = exp.DataType.Type
MAPPING_COLUMN_TYPES = {
    _T.BIGINT: "BIGINT",
    _T.INT: "INT",
    _T.SMALLINT: "SMALLINT",
    _T.TINYINT: "TINYINT",
    _T.DOUBLE: "DOUBLE",
    _T.FLOAT: "FLOAT",
    _T.DECIMAL: "DECIMAL(p, s)",
    _T.VARCHAR: "VARCHAR",
    _T.TEXT: "STRING",
    _T.BOOLEAN: "BOOLEAN",
    _T.TIMESTAMP: "TIMESTAMP",
    _T.DATE: "DATE",
}


class MappingParser(BaseParser):
    """The parser's part for mappings."""

    def _parse_create_mapping(self, replace: bool) -> nodes.CreateMapping:
        exists = self._parse_exists(not_=True)
        name = self._parse_name("mapping")
        columns: list[exp.ColumnDef] = []
        watermark: nodes.Watermark | None = None
        if self._match(TokenType.L_PAREN):
            columns, watermark = self._parse_mapping_columns()
        if not self._match_text_seq("TYPE"):
            self.raise_error(f"expected TYPE <{one_of(MAPPING_KINDS)}> after mapping {name.name!r}")
        kind_token = self._curr
        kind = self._parse_name("mapping type")
        if kind.name.upper() not in {k.upper() for k in MAPPING_KINDS}:
            self.raise_error(
                f"unknown mapping type {kind.name!r}: use {one_of(MAPPING_KINDS)}"
                f"{did_you_mean(kind.name, MAPPING_KINDS)}",
                kind_token,
            )
        options = self._parse_options() if self._match_text_seq("OPTIONS") else None
        return self.expression(
            nodes.CreateMapping(
                this=name,
                columns=columns,
                watermark=watermark,
                kind=kind,
                options=options,
                replace=replace,
                exists=exists,
            )
        )

    def _parse_mapping_columns(self) -> tuple[list[exp.ColumnDef], nodes.Watermark | None]:
        columns: list[exp.ColumnDef] = []
        watermark: nodes.Watermark | None = None
        while True:
            if self._match_text_seq("WATERMARK"):
                if watermark is not None:
                    self.raise_error("a mapping has one WATERMARK clause", self._prev)
                watermark = self._parse_watermark()
            else:
                columns.append(self._parse_mapping_column())
            if not self._match(TokenType.COMMA):
                break
        self._match_r_paren()
        return columns, watermark

    def _parse_mapping_column(self) -> exp.ColumnDef:
        if self._curr and self._curr.text.upper().startswith(("PRIMARY", "CONSTRAINT")):
            self.raise_error(
                "a mapping has no keys or constraints: remove the PRIMARY KEY / CONSTRAINT clause",
                self._curr,
            )
        name = self._parse_name("column")
        type_token = self._curr
        kind = self._parse_types(check_func=False, schema=True, allow_identifiers=False)
        if not isinstance(kind, exp.DataType) or kind.this not in MAPPING_COLUMN_TYPES:
            written = self.sql[type_token.start : self._prev.end + 1] if kind else type_token.text
            shown = repr(written) if type_token else "nothing"
            self.raise_error(
                f"unsupported type {shown} for column {name.name!r}: use "
                f"{one_of(sorted(set(MAPPING_COLUMN_TYPES.values())))}",
                type_token,
            )
        if self._curr and self._curr.text.upper() == "EXTERNAL":
            self.raise_error(
                f"pitstop reads column {name.name!r} by its name: remove EXTERNAL NAME", self._curr
            )
        return self.expression(exp.ColumnDef(this=name, kind=kind))

    def _parse_watermark(self) -> nodes.Watermark:
        if not self._match(TokenType.FOR):
            self.raise_error("expected FOR <column> after WATERMARK")
        column = self._parse_name("column")
        expected = f"WATERMARK FOR {column.name} AS {column.name} - INTERVAL 'n' unit"
        if not self._match(TokenType.ALIAS):
            self.raise_error(f"expected AS in the watermark of column {column.name!r}: {expected}")
        ref_token = self._curr
        ref = self._parse_id_var(any_token=False)
        if not isinstance(ref, exp.Identifier) or ref.name.lower() != column.name.lower():
            self.raise_error(
                f"the watermark of column {column.name!r} must subtract an interval from "
                f"{column.name!r}: {expected}",
                ref_token,
            )
        if not self._match(TokenType.DASH):
            self.raise_error(
                f"the watermark of column {column.name!r} must be {column.name} - INTERVAL "
                f"'n' unit: {expected}"
            )
        delay = self._parse_pitstop_interval(f"the watermark of column {column.name!r}")
        return self.expression(nodes.Watermark(this=column, expression=delay))
