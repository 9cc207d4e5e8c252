"""Exercise 03 reads the function a learner's `where_in_source` names in the installed libraries,
which means importing the module the path names, anywhere inside trl, peft or transformers.
Whatever that import does must end with the reading: the grading process goes on (this
submission's other tests, the next submissions of a pool process) as it was."""
import sys

import pytest
from transformers.utils import logging as hf_logging

from grader.course import COURSE
from grader.worker.loading import sibling_module

oracles = sibling_module(str(COURSE.hidden / "03_lora_sft" / "oracles.py"), "oracles")

NAMED = "transformers.convert_slow_tokenizers_checkpoints_to_fast"    # sets transformers' logging to INFO


def test_a_module_a_learner_names_is_imported_outside_the_grading_process():
    if NAMED in sys.modules:
        pytest.skip(f"{NAMED} was imported here already")
    before = hf_logging.get_verbosity()
    code, why = oracles.own_code(f"{NAMED}.convert_slow_checkpoint_to_fast")
    assert code is not None and "def convert_slow_checkpoint_to_fast" in code, why
    assert NAMED not in sys.modules, "the named module was imported into the grading process"
    assert hf_logging.get_verbosity() == before, "importing the named module changed the grading process's logging"


def test_a_path_that_does_not_resolve_says_why():
    assert oracles.own_code("trl.data_utils.no_such_function") == \
        (None, "'trl.data_utils.no_such_function': trl.data_utils has no attribute 'no_such_function' "
               "in the installed version")
