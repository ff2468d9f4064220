"""One statement in, one result out: the single execution path of the CLI, shell and server.

- :mod:`.core`: :class:`Executor`, which finds a statement's handler and runs scripts;
- :mod:`.results`: :class:`Result` and :func:`positioned`;
- :mod:`.base`: the state every handler shares and check mode's overlay;
- :mod:`.mappings`, :mod:`.queries` (views, SELECT), :mod:`.session` (SET), :mod:`.jobs`,
  :mod:`.snapshots`, :mod:`.explain` (EXPLAIN [ANALYZE], DROP DIFF): the handlers;
- :mod:`.planning`: CREATE JOB planned without starting it, for the jobs' handlers and EXPLAIN.
"""

from __future__ import annotations

from pitstop.executor.base import CheckedSnapshot
from pitstop.executor.core import Executor, changed_names
from pitstop.executor.explain import REPLAY_TIMEOUT_S
from pitstop.executor.mappings import mapping_from_node
from pitstop.executor.planning import ACTED_ON_OPTIONS, JOB_OPTIONS
from pitstop.executor.results import Result, positioned
from pitstop.executor.session import DEFAULT_AWAIT_S, SESSION_SETTINGS

__all__ = [
    "ACTED_ON_OPTIONS",
    "DEFAULT_AWAIT_S",
    "JOB_OPTIONS",
    "REPLAY_TIMEOUT_S",
    "SESSION_SETTINGS",
    "CheckedSnapshot",
    "Executor",
    "Result",
    "changed_names",
    "mapping_from_node",
    "positioned",
]
