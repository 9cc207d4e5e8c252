"""The audit's test selection (grader.session.reach): what a variant changed, and what each test of
the reference reached, recorded on a real module loaded by the real loader."""
import subprocess
import sys
import textwrap
import traceback

import pytest

from grader.session.reach import EVERYTHING, ReachRecorder, changed_definitions, needs_running
from grader.worker.loading import load_module

MODULE = textwrap.dedent('''
    """A learner's module."""
    from dataclasses import dataclass

    SCALE = 3


    @dataclass
    class Box:
        width: int = 2


    def area(box):
        """Never called by a test that only builds a Box."""
        return box.width * SCALE


    def make_box():
        return Box()


    def helper():
        return 1


    def uses_helper():
        return helper() + 1


    def spawns():
        import subprocess, sys
        return subprocess.run([sys.executable, "-c", "pass"]).returncode


    def fails():
        raise ValueError("shown in a traceback")


    class Counter:
        def bump(self):
            def inner():
                return 1
            return inner()


    AT_IMPORT = helper()
''')


def test_a_changed_function_is_named_and_nothing_else():
    changed = MODULE.replace("return box.width * SCALE", "return box.width * SCALE + 1")
    assert changed_definitions(MODULE, changed) == {"area"}
    assert changed_definitions(MODULE, MODULE) == frozenset()


def test_a_changed_method_names_its_class_and_an_added_function_is_named():
    changed = MODULE.replace("return inner()", "return inner() + 1") + "\n\ndef extra():\n    pass\n"
    assert changed_definitions(MODULE, changed) == {"Counter", "extra"}


def test_a_change_outside_any_definition_reaches_everything():
    assert changed_definitions(MODULE, MODULE.replace("SCALE = 3", "SCALE = 4")) is EVERYTHING
    assert changed_definitions(MODULE, MODULE.replace("from dataclasses", "import os\nfrom dataclasses")) is EVERYTHING
    assert changed_definitions(MODULE, "def broken(:\n") is EVERYTHING


def test_needs_running():
    assert needs_running(frozenset({"area"}), frozenset({"area", "Box"}))
    assert not needs_running(frozenset({"helper"}), frozenset({"area"}))
    assert needs_running(EVERYTHING, frozenset({"area"}))
    assert needs_running(frozenset(), EVERYTHING)


@pytest.fixture
def recorded(tmp_path):
    path = tmp_path / "learner.py"
    path.write_text(MODULE)
    recorder = ReachRecorder(path)
    module = load_module(path)      # what the in-process backend does: it gets the recorder's copy
    return recorder, module, path


def test_a_test_reaches_what_it_calls_and_what_that_names(recorded):
    recorder, module, _ = recorded
    with recorder.test("calls uses_helper"):
        assert module.uses_helper() == 2
    with recorder.test("builds a box through a function"):
        assert module.make_box().width == 2
    with recorder.test("reads a class from the module"):
        assert module.Box(5).width == 5
    with recorder.test("calls a method with a nested function"):
        assert module.Counter().bump() == 1
    with recorder.test("calls nothing"):
        pass
    reached = recorder.reached
    at_import = {"helper"}
    assert reached["calls uses_helper"] == {"uses_helper", "helper"}
    assert reached["builds a box through a function"] == {"make_box", "Box"} | at_import
    assert reached["reads a class from the module"] == {"Box"} | at_import
    assert reached["calls a method with a nested function"] == {"Counter"} | at_import
    assert reached["calls nothing"] == at_import
    assert "area" not in set().union(*reached.values())


def test_the_recorder_compares_a_variant_with_the_module_it_recorded(recorded):
    recorder, _, _ = recorded
    assert recorder.changed_in(MODULE.replace("return 1\n", "return 2\n", 1)) == {"helper"}
    assert recorder.changed_in(MODULE) == frozenset()
    assert recorder.changed_in(MODULE.replace("SCALE = 3", "SCALE = 4")) is EVERYTHING
    assert recorder.changed_in("def broken(:\n") is EVERYTHING


def test_a_test_that_starts_a_process_or_reads_the_source_reaches_everything(recorded):
    recorder, module, path = recorded
    with recorder.test("spawns"):
        assert module.spawns() == 0
    with recorder.test("reads the source"):
        assert "def area" in path.read_text()
    with recorder.test("starts a process of its own"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert recorder.reached == {"spawns": EVERYTHING, "reads the source": EVERYTHING,
                                "starts a process of its own": EVERYTHING}


def test_a_traceback_that_shows_a_line_of_the_module_is_not_a_check_of_its_source(recorded):
    recorder, module, _ = recorded
    with recorder.test("formats a traceback"):
        try:
            module.fails()
        except ValueError as exc:
            shown = "".join(traceback.format_exception(exc))
    assert 'raise ValueError("shown in a traceback")' in shown
    assert recorder.reached["formats a traceback"] == {"fails", "helper"}


def test_the_recorded_module_behaves_as_the_file_says(recorded):
    _, module, path = recorded
    assert module.__doc__ == "A learner's module."
    assert module.area.__doc__ == "Never called by a test that only builds a Box."
    assert module.area(module.Box(2)) == 6 and module.AT_IMPORT == 1
    assert module.__file__ == str(path)
