"""Slots shared by the sessions of one audit (grader.processes.slots): real flock()s on real files."""
import os
import signal

from grader.processes.slots import SharedSlots


def test_no_more_slots_are_taken_than_there_are(tmp_path):
    slots = SharedSlots.create(tmp_path, 2)
    other_session = SharedSlots.from_json(slots.to_json())
    first, second = slots.take(), other_session.take()
    assert first is not None and second is not None
    assert slots.take() is None and other_session.take() is None
    other_session.give_back(second)
    assert slots.take() is not None


def test_a_holder_that_dies_frees_its_slot(tmp_path):
    slots = SharedSlots.create(tmp_path, 1)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        taken = SharedSlots.from_json(slots.to_json()).take()
        os.write(write, b"1" if taken is not None else b"0")
        signal.pause()
    assert os.read(read, 1) == b"1"
    assert slots.take() is None
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert slots.take() is not None


def test_a_fork_that_forgets_its_inherited_slots_does_not_keep_them(tmp_path):
    slots = SharedSlots.create(tmp_path, 1)
    slot = slots.take()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        slots.forget_inherited()
        os.write(write, b"ready")
        signal.pause()
    assert os.read(read, 5) == b"ready"
    slots.give_back(slot)
    try:
        assert SharedSlots.from_json(slots.to_json()).take() is not None, "the fork still holds the slot"
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
