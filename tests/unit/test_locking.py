"""The inter-process lock: exclusive, times out naming the holder, released on exit."""

from __future__ import annotations

import os
import threading
import time

import pytest

from fdl.locking import FileLock, LockBusy, describe_holder


def test_second_holder_times_out_and_names_the_first(tmp_path):
    path = tmp_path / "cu128.lock"
    with FileLock(path, purpose="installing cu128"), pytest.raises(LockBusy) as caught:
        FileLock(path, timeout=0.2).acquire()
    message = str(caught.value)
    assert f"process {os.getpid()}" in message
    assert "installing cu128" in message
    assert str(path) in message
    assert caught.value.hint


def test_lock_is_free_again_after_the_block(tmp_path):
    path = tmp_path / "x.lock"
    with FileLock(path):
        pass
    with FileLock(path, timeout=0) as lock:
        assert lock.held
    assert not lock.held
    assert path.exists()  # never removed: removing it would break exclusion


def test_waiter_is_told_and_proceeds_when_released(tmp_path):
    path = tmp_path / "x.lock"
    order: list[str] = []
    told: list[str] = []
    first = FileLock(path, purpose="first")
    first.acquire()

    def second() -> None:
        with FileLock(path, timeout=10, on_wait=told.append):
            order.append("second")

    thread = threading.Thread(target=second)
    thread.start()
    deadline = time.monotonic() + 10
    while not told and time.monotonic() < deadline:
        time.sleep(0.01)
    assert told, "the waiting thread was never told about the holder"
    order.append("first done")
    first.release()
    thread.join(10)
    assert order == ["first done", "second"]
    assert len(told) == 1 and "first" in told[0]


def test_only_one_thread_inside_at_a_time(tmp_path):
    path = tmp_path / "x.lock"
    inside = [0]
    worst = [0]

    def work() -> None:
        for _ in range(20):
            with FileLock(path, timeout=30, poll=0.001):
                inside[0] += 1
                worst[0] = max(worst[0], inside[0])
                time.sleep(0.0005)
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert worst[0] == 1


def test_describe_holder_of_an_unknown_file(tmp_path):
    path = tmp_path / "x.lock"
    assert describe_holder(path) == "another process"
    path.write_text("garbage")
    assert describe_holder(path) == "another process"
