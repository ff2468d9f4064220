"""Stateful stage kinds, one module each (DESIGN.md section 6): what a kind declares is in
:mod:`pitstop.stages.base`, the list of kinds in :mod:`pitstop.stages.registry`.

- :mod:`~pitstop.stages.tumble`, :mod:`~pitstop.stages.hop`, :mod:`~pitstop.stages.session`:
  windowed aggregations (their shared part in :mod:`~pitstop.stages.windowed`), planned in
  accumulator form (:mod:`~pitstop.stages.accumulators`).
"""
