"""The grader's log: what it swallows to keep grading (a folder it could not remove, a process
already gone, a library that would not preload) goes to the `grader` logger (each module logs
as `logging.getLogger(__name__)`), so that a host that behaves oddly leaves something to read.
Quiet unless asked for: `grader --verbose`, or GRADER_VERBOSE=1 in the environment, which the
processes a grading starts inherit (the pool's processes and their pytest sessions). A sandboxed
worker starts with a cleared environment, and logs nothing."""
from __future__ import annotations

import logging
import os
import sys

VERBOSE_ENV = "GRADER_VERBOSE"
ROOT = "grader"


def configure(verbose: bool = False) -> None:
    """Show the grader's log on stderr when `verbose` or GRADER_VERBOSE=1 says so (and pass the
    wish on to the processes this one starts); otherwise leave it silent."""
    if verbose:
        os.environ[VERBOSE_ENV] = "1"
    root = logging.getLogger(ROOT)
    if os.environ.get(VERBOSE_ENV) != "1" or any(getattr(h, "_grader", False) for h in root.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"%(asctime)s {os.getpid()} %(name)s: %(message)s", "%H:%M:%S"))
    handler._grader = True          # type: ignore[attr-defined]  # one handler, however often configured
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
