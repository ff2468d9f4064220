"""Stateful stage kinds, one module each (DESIGN.md section 6): what a kind declares is in
:mod:`pitstop.stages.base`, the list of kinds in :mod:`pitstop.stages.registry`.

- :mod:`~pitstop.stages.tumble`, :mod:`~pitstop.stages.hop`, :mod:`~pitstop.stages.session`:
  windowed aggregations (their shared part in :mod:`~pitstop.stages.windowed`), planned in
  accumulator form (:mod:`~pitstop.stages.accumulators`);
- :mod:`~pitstop.stages.running`: a running aggregate (GROUP BY without a window), in the same
  accumulator form, whose rows are updated in an upsert sink;
- :mod:`~pitstop.stages.dedup`: deduplication (``SELECT DISTINCT``, ``ROW_NUMBER() ... = 1``).
"""
