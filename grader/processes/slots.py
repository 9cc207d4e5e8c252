"""Slots shared by the processes of one run, so that together they run at most so many things.

The audit grades each task's trees in forks of that task's collected session, several sessions
at once (`grader.session.variant_forks`). A fixed share of forks per session leaves a core idle as
soon as one session runs out of trees while another still has many; instead, every session takes
a slot for each fork from one shared set and gives it back when the fork ends, so the last
session standing uses every core.

A slot is an exclusive `flock` on one of `count` files: the kernel frees it when its holder
closes it or dies, so a session that is killed leaves no slot taken for ever. A fork closes the
slots it inherits at once (`forget_inherited`): a slot stays held exactly as long as its taker
holds it.
"""
from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

POLL_S = 0.05


class SharedSlots:
    def __init__(self, folder: Path, count: int):
        self.paths = [Path(folder) / f"slot-{i}" for i in range(max(1, count))]
        self._held: set[int] = set()

    @classmethod
    def create(cls, folder: Path, count: int) -> SharedSlots:
        slots = cls(folder, count)
        for path in slots.paths:
            path.touch(mode=0o600)
        return slots

    def to_json(self) -> dict:
        return {"folder": str(self.paths[0].parent), "count": len(self.paths)}

    @classmethod
    def from_json(cls, data: dict) -> SharedSlots:
        return cls(Path(data["folder"]), int(data["count"]))

    def take(self) -> int | None:
        """A free slot (a file descriptor to give back), or None when every one is taken."""
        for path in self.paths:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self._held.add(fd)
            return fd
        return None

    def wait_for_one(self) -> int:
        while (slot := self.take()) is None:
            time.sleep(POLL_S)
        return slot

    def give_back(self, slot: int) -> None:
        self._held.discard(slot)
        os.close(slot)

    def forget_inherited(self) -> None:
        """In a fork: close the copies of the parent's slots, which would otherwise keep them
        taken until this process ends."""
        for fd in self._held:
            os.close(fd)
        self._held.clear()
