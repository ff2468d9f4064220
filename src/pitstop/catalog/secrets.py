"""Mapping secrets (a password in a Postgres ``dsn``, a Kafka ``sasl.password``), kept out of the
catalog's tables.

Any SELECT a server's client sends may read ``pitstop.mappings``, and a home's catalog file is
what people copy to show a problem. So a mapping is stored with its options as ``SHOW MAPPINGS``
prints them (:func:`pitstop.dsn.mask_options`), and the values the mask hid are kept
in ``<home>/secrets.json``, readable by its owner only (mode 0600), replaced atomically. The
catalog puts them back when it reads a mapping, so the connectors see the options as written.

Only this process writes the file (the home's lock keeps others out); a process that only
checks the home reads it. A secret whose mapping is gone (a crash between the two writes) is
removed when the home is next opened for writing.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

from pitstop import dsn
from pitstop.catalog.rows import Mapping

log = logging.getLogger(__name__)
FILE = "secrets.json"


def split(mapping: Mapping) -> tuple[Mapping, dict[str, str]]:
    """The mapping as stored (secrets masked) and the options' values the mask hid."""
    shown = dsn.mask_options(mapping.options)
    hidden = {k: v for k, v in mapping.options.items() if shown[k] != v}
    return replace(mapping, options=shown), hidden


class Secrets:
    """``<home>/secrets.json``: ``{mapping name (lower case): {option: value}}``."""

    def __init__(self, home: Path) -> None:
        self.path = home / FILE
        self._lock = threading.Lock()
        self._values: dict[str, dict[str, str]] | None = None

    def _read(self) -> dict[str, dict[str, str]]:
        if self._values is None:
            try:
                self._values = json.loads(self.path.read_text())
            except FileNotFoundError:
                self._values = {}
        return self._values

    def join(self, mapping: Mapping) -> Mapping:
        """The mapping with its hidden values back (as the connectors need them)."""
        with self._lock:
            hidden = self._read().get(mapping.name.lower())
        return replace(mapping, options={**mapping.options, **hidden}) if hidden else mapping

    def put(self, name: str, hidden: dict[str, str]) -> None:
        """Keep ``hidden`` as mapping ``name``'s secrets (none: forget its secrets)."""
        with self._lock:
            values = dict(self._read())
            if hidden:
                values[name.lower()] = dict(hidden)
            elif name.lower() not in values:
                return
            else:
                del values[name.lower()]
            self._write(values)

    def keep_only(self, names: set[str]) -> None:
        """Forget the secrets of mappings that no longer exist."""
        with self._lock:
            values = self._read()
            left = {k: v for k, v in values.items() if k in {n.lower() for n in names}}
            if left != values:
                self._write(left)

    def _write(self, values: dict[str, dict[str, str]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".secrets-", dir=self.path.parent)  # created 0600
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(values, handle, indent=1, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._values = values
