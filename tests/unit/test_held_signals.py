"""A signal that arrives while fdl starts a child is held, then raised where the child's
group is ended (fdl/_group.HeldSignals): before, fdl's handler could raise inside
``subprocess.Popen`` after the fork, and the child was left running."""

from __future__ import annotations

import os
import signal

import pytest

from fdl._group import HeldSignals


class Stop(BaseException):
    pass


def _raise(signum: int, _frame: object) -> None:
    raise Stop(signum)


@pytest.fixture
def raising_handlers():
    previous = {sig: signal.signal(sig, _raise) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_held_is_raised_at_release_and_not_before(raising_handlers, sig) -> None:
    held = HeldSignals()
    os.kill(os.getpid(), sig)
    for _ in range(1000):  # the handler runs between bytecodes: give it many chances
        pass
    assert signal.getsignal(sig) is not _raise  # held, not acted on
    with pytest.raises(Stop) as stopped:
        held.release()
        for _ in range(1000):
            pass
    assert stopped.value.args == (sig,)
    assert signal.getsignal(sig) is _raise  # the handler is back


def test_nothing_held_is_nothing_raised(raising_handlers) -> None:
    held = HeldSignals()
    held.release()
    assert signal.getsignal(signal.SIGTERM) is _raise
    assert signal.getsignal(signal.SIGINT) is _raise


def test_a_signal_twice_is_raised_once() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: seen.append(signum))
    try:
        held = HeldSignals()
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):
            pass
        assert seen == []
        held.release()
        for _ in range(1000):
            pass
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)
