"""The clock alone, on both implementations: the order it fires wake-ups and steps in, cancelling, and the
pending wake-ups it holds (hand-worked, no world around it)."""

from __future__ import annotations

import pytest

from simfl.sim.clock import EVAL, ClockKind, Wake, WakeKind, make_clock, wake_of


@pytest.mark.parametrize("kind", ["simpy", "heap"])
def test_wake_ups_and_steps_fire_in_tie_order_and_a_cancelled_one_never(kind: ClockKind) -> None:
    fired: list[str] = []
    handlers: dict[WakeKind, object] = {}
    clock = make_clock(kind, None, 5, handlers)  # type: ignore[arg-type]  # filled below, read at each firing

    def deliver(wake: Wake) -> None:
        fired.append(f"deliver {wake.target} at {clock.now}")
        if wake.target == 1:  # a step made now runs after the wake-ups already queued for now (order 6, 7)...
            clock.soon(lambda: fired.append("step"))
            clock.wake("deliver", 2.0, 9)  # ...and before one queued after it, at the same instant and priority

    handlers.update({"deliver": deliver, "eval": lambda w: fired.append(f"eval at {clock.now}"),
                     "stop": lambda w: clock.stop()})
    first = clock.wake("eval", 2.0)  # created first, but the evaluation's priority comes after round ends
    assert first == Wake(2.0, EVAL, 5, "eval", None) == wake_of("eval", 5, 2.0)
    clock.wake("deliver", 2.0, 1)
    clock.wake("deliver", 2.0, 2)
    gone = clock.wake("deliver", 2.0, 3)
    clock.wake("deliver", 1.5, 4)
    clock.wake("stop", 3.0)
    clock.cancel(gone)
    assert clock.wakes == 11
    assert [(w.order, w.target) for w in clock.pending().values()] == [(5, None), (6, 1), (7, 2), (9, 4), (10, None)]
    clock.run()
    assert fired == ["deliver 4 at 1.5", "deliver 1 at 2.0", "deliver 2 at 2.0", "step", "deliver 9 at 2.0",
                     "eval at 2.0"]
    assert clock.now == 3.0 and clock.pending() == {} and clock.wakes == 12


@pytest.mark.parametrize("kind", ["simpy", "heap"])
def test_a_resumed_clock_queues_saved_wake_ups_and_goes_on_counting(kind: ClockKind) -> None:
    fired: list[int] = []
    handlers: dict[WakeKind, object] = {"deliver": lambda w: fired.append(w.order)}
    clock = make_clock(kind, 4.0, 20, handlers)  # type: ignore[arg-type]
    handlers["stop"] = lambda w: clock.stop()
    for saved in (wake_of("deliver", 3, 4.0, 0), wake_of("deliver", 7, 4.0, 1)):  # in creation order, as a resume
        clock.at(saved)
    clock.soon(lambda: fired.append(-1))  # made after both: runs after them
    made = clock.wake("deliver", 4.0, 2)
    clock.wake("stop", 5.0)
    assert made.order == 20 and list(clock.pending()) == [3, 7, 20, 21]
    clock.run()
    assert fired == [3, 7, -1, 20]
    with pytest.raises(ValueError, match="before now"):
        clock.at(wake_of("deliver", 30, 4.5, 0))
