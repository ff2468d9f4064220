"""The modules of PostgreSQL's semantics (``pitstop/server/pg*.py``) borrow no private names of each
other (pgmath read pgnumeric's ``_parse``, ``_scale``, ``_text``): what they share is a public API,
named in ``__all__`` and documented there. (``server/bulk.py`` still reads ``pgtypes._text_float``
and three more: not covered here yet.)"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parent.parent / "src"


def _borrowed(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    modules: set[str] = set()  # names bound to pitstop modules in this file
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pitstop"):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{path.relative_to(SRC)}:{node.lineno} imports {node.module}.{alias.name}")
                modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name.startswith("pitstop"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{path.relative_to(SRC)}:{node.lineno} reads {node.value.id}.{node.attr}")
    return found


def test_the_pg_semantics_modules_share_public_names_only() -> None:
    paths = sorted((SRC / "pitstop" / "server").glob("pg*.py"))
    assert len(paths) > 5
    borrowed = [line for path in paths for line in _borrowed(path)]
    assert borrowed == []
