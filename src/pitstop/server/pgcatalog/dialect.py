"""How client statements are parsed (:data:`DIALECT`): by the translation, and by
:mod:`pitstop.server.paramtypes` for the casts of a statement's parameters.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.tokens import TokenType

from pitstop.server import pgsemantics


class _PgDialect(Postgres):
    """PostgreSQL as clients write it (strict where PostgreSQL is: :mod:`pgsemantics`), plus arrays
    of OID-like types (``::oid[]``, ``::regtype[]``)."""

    class Parser(pgsemantics.StrictParser):
        def _parse_types(
            self,
            check_func: bool = False,
            schema: bool = False,
            allow_identifiers: bool = True,
            with_collation: bool = False,
        ) -> exp.Expr | None:
            this = super()._parse_types(check_func, schema, allow_identifiers, with_collation)
            if isinstance(this, exp.ObjectIdentifier) and self._match_pair(
                TokenType.L_BRACKET, TokenType.R_BRACKET
            ):
                return exp.DataType(this=exp.DType.ARRAY, expressions=[this], nested=True)
            return this


DIALECT = _PgDialect()
"""How client statements are parsed (here, and for their parameters' casts in paramtypes)."""
