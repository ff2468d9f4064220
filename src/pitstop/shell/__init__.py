"""pitstop's front ends for people and scripts: the interactive shell and script mode.

Both run statements through one :class:`~pitstop.executor.Executor`; this package only reads
input, formats results and errors, and shows live feedback.
"""
