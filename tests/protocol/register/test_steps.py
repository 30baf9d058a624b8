"""Work in steps: ``whole`` runs them back to back, ``apart`` ends the last slice's turn."""

from __future__ import annotations

from collections.abc import Generator

from protocol.register.steps import apart, whole


def sliced(slices: int, log: list[str]) -> Generator[None, None, str]:
    for n in range(slices):
        if n:
            yield
        log.append(f"slice {n}")
    return "done"


def test_apart_adds_a_step_after_work_that_took_several() -> None:
    log: list[str] = []
    steps = apart(sliced(3, log))
    taken = 0
    try:
        while True:
            next(steps)
            taken += 1
            log.append("turn ends")
    except StopIteration as done:
        assert done.value == "done"
    # Three slices took two steps; the third slice's turn ends before what follows.
    assert taken == 3
    assert log == ["slice 0", "turn ends", "slice 1", "turn ends", "slice 2", "turn ends"]


def test_apart_adds_nothing_to_work_done_in_one_go() -> None:
    log: list[str] = []
    steps = apart(sliced(1, log))
    assert whole(steps) == "done"
    assert log == ["slice 0"]
    steps = apart(sliced(1, []))
    try:
        next(steps)
    except StopIteration as done:
        assert done.value == "done"
    else:
        raise AssertionError("work of one slice took a step")
