"""Connection strings with passwords in them: what may be shown of them, and where they point.

A PostgreSQL DSN is a URL (``postgresql://user:secret@host:5432/db?sslmode=require``) or
``key=value`` pairs (``host=h port=5432 user=u password=secret dbname=db``). Whatever pitstop prints
about one — ``SHOW MAPPINGS``, ``\\d``, the statement text kept in the catalog, logs and errors —
goes through :func:`mask` first, so a password never appears; :func:`where` names the server an
error is about (host and port only).

Pure string work: no psycopg import, so the catalog and the shell can use it.
"""

from __future__ import annotations

import re

MASK = "***"

# user:password@ in any URL (postgresql://, postgres://, and others alike).
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s'\"]*:)(?P<secret>[^@\s'\"]*)(?=@)")
# password=... as a key=value pair or a URL query parameter: quoted ('a b', \' escapes) or a word.
_KEY_PASSWORD = re.compile(
    r"(?P<head>\b(?:password|sslpassword)\s*=\s*)(?P<secret>'(?:[^'\\]|\\.)*'|[^\s&'\"]+)", re.IGNORECASE
)
_SECRET_NAME = re.compile(r"password|secret", re.IGNORECASE)


def mask(text: str) -> str:
    """``text`` with every password in a DSN (URL or key=value) replaced by ``***``."""
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)
    return _KEY_PASSWORD.sub(lambda m: m.group("head") + MASK, text)


def mask_options(options: dict[str, str]) -> dict[str, str]:
    """A mapping's options as they may be shown: DSNs masked, options named like a secret
    (``sasl.password``, ``password``) replaced by ``***``."""
    return {k: MASK if _SECRET_NAME.search(k) else mask(v) for k, v in options.items()}


def where(params: dict[str, str]) -> str:
    """``host:port`` (or the socket folder) of parsed connection parameters, for messages."""
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port") or "5432"
    return f"{host}:{port}"
