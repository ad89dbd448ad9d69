"""The cyclic collector is paused around a population's building and restored as it was (simfl.collector)."""

from __future__ import annotations

import gc

import pytest

from simfl import collector


def test_paused_restores_the_collector_as_it_was() -> None:
    assert gc.isenabled()
    with collector.paused():
        assert not gc.isenabled()
        with collector.paused():  # nested: the outer pause still holds after the inner one
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(KeyError), collector.paused():
        raise KeyError("a failing build")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector.paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_running_freezes_what_exists_and_unfreezes_after() -> None:
    with collector.running(pause=False):
        assert gc.isenabled() and gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    with collector.running(pause=True):
        assert not gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == 0
