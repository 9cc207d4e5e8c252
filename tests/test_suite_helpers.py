"""The helpers the hidden suites share: library notices stay out of feedback while a block runs,
and torch runs one thread there; both leave the process as they found it."""
import warnings

import torch
from transformers.utils import logging as hf_logging

from grader.suite.helpers import one_torch_thread, quiet_libraries


def test_quiet_libraries_silences_warnings_and_transformers_then_restores_them():
    import datasets.utils.logging as datasets_logging

    hf_logging.set_verbosity_warning()
    datasets_logging.enable_progress_bar()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_libraries():
            warnings.warn("a deprecation", DeprecationWarning, stacklevel=1)
            assert hf_logging.get_verbosity() == hf_logging.ERROR
            assert not datasets_logging.is_progress_bar_enabled()
        warnings.warn("after", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["after"]
    assert hf_logging.get_verbosity() == hf_logging.WARNING
    assert datasets_logging.is_progress_bar_enabled()


def test_one_torch_thread_inside_the_block_only():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with one_torch_thread():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
