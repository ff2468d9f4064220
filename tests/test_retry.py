"""The one retry loop (:func:`pitstop.retry.retry`): a recorded sleep and a fake clock, nothing sleeps."""

from __future__ import annotations

import pytest

from pitstop.retry import Backoff, retry


class Away(Exception):
    """A failure that passes."""


class Flaky:
    """Fails with ``Away`` ``failures`` times, then returns ``"done"``."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise Away(f"away {self.calls}")
        return "done"


class Clock:
    """A clock that moves only when the recorded sleep sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_backoff_doubles_from_the_first_delay_up_to_the_longest() -> None:
    delays = Backoff(first_s=0.5, max_s=5.0).delays()
    assert [next(delays) for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]


def test_backoff_takes_another_factor() -> None:
    delays = Backoff(first_s=1.0, max_s=10.0, factor=3.0).delays()
    assert [next(delays) for _ in range(4)] == [1.0, 3.0, 9.0, 10.0]


def test_a_transient_failure_is_tried_again_after_each_delay_until_it_succeeds() -> None:
    clock, flaky, seen = Clock(), Flaky(failures=5), []
    result = retry(
        flaky,
        transient=Away,
        backoff=Backoff(first_s=0.5, max_s=5.0),
        on_transient=lambda exc: seen.append(str(exc)),
        sleep=clock.sleep,
        clock=lambda: clock.now,
    )
    assert result == "done" and flaky.calls == 6
    assert clock.slept == [0.5, 1.0, 2.0, 4.0, 5.0]
    assert seen == ["away 1", "away 2", "away 3", "away 4", "away 5"]


def test_success_at_the_first_attempt_neither_waits_nor_reports() -> None:
    clock, seen = Clock(), []
    assert (
        retry(Flaky(0), transient=Away, backoff=Backoff(1, 1), on_transient=seen.append, sleep=clock.sleep)
        == "done"
    )
    assert clock.slept == [] and seen == []


def test_another_exception_propagates_at_once() -> None:
    clock = Clock()

    def broken() -> None:
        raise ValueError("not transient")

    with pytest.raises(ValueError, match="not transient"):
        retry(broken, transient=Away, backoff=Backoff(1, 1), sleep=clock.sleep)
    assert clock.slept == []


def test_several_exception_classes_may_be_transient() -> None:
    calls = iter([Away("a"), KeyError("b"), None])

    def step() -> str:
        exc = next(calls)
        if exc is not None:
            raise exc
        return "done"

    clock = Clock()
    assert retry(step, transient=(Away, KeyError), backoff=Backoff(1, 1), sleep=clock.sleep) == "done"
    assert clock.slept == [1, 1]


def test_the_last_failure_is_raised_after_the_attempts_allowed() -> None:
    clock, flaky, seen = Clock(), Flaky(failures=10), []
    with pytest.raises(Away, match="away 3"):
        retry(
            flaky,
            transient=Away,
            backoff=Backoff(1, 8),
            on_transient=seen.append,
            attempts=3,
            sleep=clock.sleep,
        )
    assert flaky.calls == 3
    assert clock.slept == [1, 2]  # no wait after the last attempt
    assert len(seen) == 3  # each failure is reported, the last too (its clean-up runs)


def test_no_attempt_starts_after_the_deadline() -> None:
    clock, flaky = Clock(), Flaky(failures=10)
    with pytest.raises(Away, match="away 3"):
        retry(
            flaky,
            transient=Away,
            backoff=Backoff(1, 8),
            deadline=clock.now + 5.0,
            sleep=clock.sleep,
            clock=lambda: clock.now,
        )
    # Waits of 1 and 2 end at +3; the next wait (4) would end at +7, past the deadline.
    assert clock.slept == [1, 2] and flaky.calls == 3


def test_an_operation_that_refuses_to_start_ends_the_retries() -> None:
    """How the sinks stop: their ``sleep`` is a stop event's wait, and the operation raises once
    the event is set."""
    stopped = False

    def write() -> None:
        if stopped:
            raise RuntimeError("stopped before the batch was written")
        raise Away("server away")

    def wait(seconds: float) -> None:
        nonlocal stopped
        stopped = True

    with pytest.raises(RuntimeError, match="stopped before"):
        retry(write, transient=Away, backoff=Backoff(0.5, 5), sleep=wait)
