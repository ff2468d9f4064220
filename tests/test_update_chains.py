"""Update after update (issue 23): chains of pit stops played on real Spark and real DuckDB files,
every sink checked against the model (tests/chains.py) after every step.

The fixed chains are bugs found on the way, each kept as the chain that showed it. The generated
ones run ``PITSTOP_CHAINS`` seeded chains (default 2 in ``make test``; ``make chains N=200``)
from ``PITSTOP_CHAIN_SEED`` on; a failure prints its seed, the shrunk chain (paste it here as a
test) and the SQL it ran."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chains import (
    Branch,
    ChainFailure,
    Input,
    Player,
    Resume,
    Restore,
    Snapshot,
    Start,
    Step,
    Suspend,
    Update,
    generate,
    shrink,
)
from conftest import run, settings
from pitstop.engine.manager import Manager

pytestmark = pytest.mark.spark


def play(tmp_path: Path, chain: list[Step]) -> Player:
    manager = Manager(settings(tmp_path / "home"))
    try:
        player = Player(lambda sql: run(manager, sql), manager.catalog.query, tmp_path / "ev")
        player.play(chain)
        return player
    finally:
        manager.close()


HOUR = Branch("w1", "ck_1h", 60, ("n", "total"))
TEN = Branch("w2", "ck_10min", 10, ("n", "total"))
FIVE = Branch("w3", "ck_5min", 5, ("n", "total"))


def inputs(seed: int) -> Input:
    return Input(seed, 20, 30, 0.1)


@pytest.mark.parametrize("fmt", ["auto", "canonical"])
def test_a_stage_added_at_one_pit_stop_goes_on_natively_from_the_next(tmp_path: Path, fmt: str) -> None:
    """The issue's chain: 1 h, + 10 min, + 5 min. The 10-minute stage was new in the second run,
    where it started on the job's clock (a clock-only seed, no seed source); the snapshot recorded
    it as seeded, so the third run gave its branch an empty seed source its checkpoint never had
    ("There are [1] sources in the checkpoint offsets and now there are [2] sources")."""
    play(
        tmp_path,
        [
            inputs(1),
            Start((HOUR,)),
            inputs(2),
            Update((HOUR, TEN), fmt),
            inputs(3),
            Update((HOUR, TEN, FIVE), "auto"),
            inputs(4),
            Update((HOUR, TEN, FIVE), "auto"),
            inputs(5),
        ],
    )


def chain_count() -> int:
    return int(os.environ.get("PITSTOP_CHAINS", "2"))


def first_seed() -> int:
    return int(os.environ.get("PITSTOP_CHAIN_SEED", "1000"))


@pytest.mark.parametrize("seed", range(first_seed(), first_seed() + chain_count()))
def test_generated_chain(tmp_path: Path, seed: int) -> None:
    chain = generate(seed, steps=int(os.environ.get("PITSTOP_CHAIN_STEPS", "4")))
    try:
        play(tmp_path / "full", chain)
    except ChainFailure as failure:
        if os.environ.get("PITSTOP_CHAIN_SHRINK", "1") == "0":
            raise
        tries = iter(range(10_000))

        def fails(candidate: list[Step]) -> bool:
            try:
                play(tmp_path / f"try{next(tries)}", candidate)
            except ChainFailure:
                return True
            return False

        small = shrink(chain, fails)
        try:
            play(tmp_path / "small", small)
        except ChainFailure as again:
            failure = again
        pytest.fail(
            f"chain seed {seed} fails at {failure}\nshrunk chain ({len(small)} of {len(chain)} steps):\n  "
            + ",\n  ".join(repr(s) for s in small)
            + f"\nits SQL:\n{failure.script}",
            pytrace=False,
        )


__all__ = ["Resume", "Restore", "Snapshot", "Suspend"]
