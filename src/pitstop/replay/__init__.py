"""EXPLAIN ANALYZE CREATE JOB: replay the input a job read after a snapshot through the changed SQL,
in a sandbox, and diff what it writes against what the job's own SQL writes over the same input.

- :mod:`.span`: the input replayed, from the snapshot's cut to a later cut of the job;
- :mod:`.capture`: the scratch tables a replay's branches write instead of their sinks;
- :mod:`.diff`: the comparison of two captures, sink by sink, kept as tables in schema ``diff``;
- :mod:`.fidelity`: the replay of the job's own SQL against what the job wrote to its sinks;
- :mod:`.sandbox`: a replay run, restored from the snapshot as ``CREATE JOB`` would restore it.
"""
