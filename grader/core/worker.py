"""The worker's own side: a process that imports one learner module and answers calls.

It is started by `grader.core.worker_process` (the trusted side), usually inside the sandbox,
and it is the only part of the grader that learner code shares a process with: it imports
nothing but `dispatch`, `wire` and `loading`. Before the learner's module is imported, it caps
its own resources (rlimits given by the trusted side); with no capabilities it cannot raise them
again.
"""
from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

from grader.core import wire
from grader.core.dispatch import answer
from grader.core.loading import StudentImportError, load_module


def apply_rlimits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (value, value))


def serve(module_path: Path, channel: wire.Channel) -> None:
    try:
        module = load_module(module_path)
    except StudentImportError as exc:
        channel.send({"ready": False, "error": str(exc)})
        return
    channel.send({"ready": True})
    while True:
        try:
            header, blobs = channel.receive()
        except wire.ChannelClosed:
            return
        channel.send(*answer(module, module_path, header, blobs))


def main(argv: list[str]) -> None:
    module_path, read_fd, write_fd, rlimits = Path(argv[0]), int(argv[1]), int(argv[2]), json.loads(argv[3])
    apply_rlimits(rlimits)
    serve(module_path, wire.Channel(read_fd, write_fd))


if __name__ == "__main__":
    main(sys.argv[1:])
