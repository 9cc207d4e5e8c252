"""What the hidden suites' oracles share beyond assertions (`grader.suite.checks`): the libraries'
notices kept out of feedback, and torch on one thread for tiny timed work. For the test's process
only: probes and the files they load run beside learner code, where `grader.worker` is all of the
grader there is (`tests/test_layout.py`).

torch and transformers are imported inside the helpers (datasets is only looked up, once loaded),
so that a suite that needs none of them pays for none."""
from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_libraries() -> Iterator[None]:
    """transformers' and datasets' notices (deprecations, tied weights, token ids beyond a tiny
    vocabulary, caching turned off under checkpointing, progress bars) would land in the learner's
    test output: keep them out while the block runs. datasets is quieted only once loaded."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    datasets_logging = sys.modules.get("datasets.utils.logging")
    bars = datasets_logging.is_progress_bar_enabled() if datasets_logging else False
    hf_logging.set_verbosity_error()
    if datasets_logging and bars:
        datasets_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(level)
        if datasets_logging and bars:
            datasets_logging.enable_progress_bar()


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Tiny CPU matmuls and profiles on one intra-op thread: on cores shared with other processes,
    a second OpenMP thread mostly spins and waits."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
