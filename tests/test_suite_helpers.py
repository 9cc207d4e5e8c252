"""The helpers the hidden suites share: library notices stay out of feedback while a block runs,
and torch runs one thread there; both leave the process as they found it. A test's title is its
docstring's whole first sentence, a value cut short in a message says so, and a GPU test names the devices it needs."""
import warnings

import numpy as np
import pytest
import torch
from transformers.utils import logging as hf_logging

from grader.suite.checks import shown
from grader.suite.helpers import one_torch_thread, quiet_libraries
from grader.suite.metadata import of_function


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


def test_a_title_is_the_first_paragraph_of_the_docstring_on_one_line():
    def test_vectorised():
        """every table built with groupby, merge and arithmetic on whole columns: no iterrows, apply(axis=1),
        apply of a Python function row by row

        The rest explains."""

    assert of_function(test_vectorised).title == ("every table built with groupby, merge and arithmetic on whole "
                                                  "columns: no iterrows, apply(axis=1), apply of a Python function "
                                                  "row by row")


def test_a_gpu_test_needs_the_devices_its_marker_names():
    @pytest.mark.gpu
    def test_one(): ...

    @pytest.mark.gpu(2)
    def test_two(): ...

    def test_none(): ...

    assert [of_function(t).gpus for t in (test_one, test_two, test_none)] == [1, 2, 0]
    devices = torch.cuda.device_count()
    assert [of_function(t).lacks_gpus() for t in (test_one, test_two, test_none)] == [devices < 1, devices < 2, False]


def test_a_value_cut_short_is_marked_and_a_numpy_scalar_reads_as_python():
    long = {"lost": list(range(100))}
    assert shown(long, 40) == repr(long)[:39] + "…" and len(shown(long, 40)) == 40
    assert shown(np.float64(0.5)) == "0.5" and shown([1, 2]) == "[1, 2]"
