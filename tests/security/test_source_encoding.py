"""The trusted side reads a learner's module as Python reads it: a module that declares its
encoding (PEP 263, `# -*- coding: latin-1 -*-`) is a valid module, and loses nothing for it.

Exercise 01's structural tests read the source in the test process, and a failure's location is
the learner's line read from the file: both once decoded the file as UTF-8, which a Latin-1
module with one accented letter is not."""
from pathlib import Path

import pytest

from grader.course import COURSE
from grader.running import runner
from grader.worker.loading import function_location, learner_source, sibling_module

attacks = sibling_module(__file__, "attacks")
hostile = sibling_module(__file__, "hostile")

CODING = "# -*- coding: latin-1 -*-\n"
ACCENTED = "    # Schéma: scores = einsum(q, k) / sqrt(d), then softmax\n"    # é is one byte in Latin-1, not UTF-8


def latin1_reference(folder: Path) -> Path:
    """The reference, its softmax's `return` line commented with an accented letter, saved in Latin-1."""
    head, rest = hostile.REFERENCE.split("def softmax(", 1)
    signature, body = rest.split("\n", 1)
    assert "not 0 / 0\n" in body.split("\ndef ", 1)[0], "softmax's return line changed: mark another"
    body = body.replace("not 0 / 0\n", "not 0 / 0  # é\n", 1)
    source = CODING + head + "def softmax(" + signature + "\n" + ACCENTED + body
    return written_not_utf8(folder, source.encode("latin-1"))


def written_not_utf8(folder: Path, source: bytes) -> Path:
    """`source` as exercise 01's module under `folder`: it must not be valid UTF-8, or the test shows nothing."""
    compile(source, "attention.py", "exec")        # Python takes it
    try:
        source.decode("utf-8")
    except UnicodeDecodeError:
        module = folder / hostile.TASK / "attention.py"
        module.parent.mkdir(parents=True)
        module.write_bytes(source)
        return module
    raise AssertionError("the module must not be valid UTF-8, or this test shows nothing")


def test_a_latin1_module_is_read_as_python_reads_it(tmp_path):
    module = latin1_reference(tmp_path)
    assert "Schéma" in learner_source(module)
    location = function_location(module, "softmax")
    assert location is not None and location["code"].endswith("# é"), location


def test_a_latin1_reference_gets_full_marks_on_the_einsum_structure(tmp_path):
    latin1_reference(tmp_path / "learner")
    job = runner.GradingRun(tmp_path / "learner", [COURSE.task_named("01")],
                            extra_args=["-k", " or ".join(attacks.STRUCTURAL_TESTS)])
    report = runner.run(job)
    tests = report.tests()
    assert {attacks.test_name(t) for t in tests} == set(attacks.STRUCTURAL_TESTS), [t.id for t in tests]
    lost = [(t.id, t.feedback) for t in tests if t.status != "passed"]
    assert not lost, lost
    assert report.total.points == report.total.max_points > 0 and report.complete, report.problems


INVALID_UTF8 = b"  # \xe9t\xe9: not UTF-8, and no coding line says otherwise\n"


def invalid_utf8_reference(folder: Path) -> Path:
    """The reference with bytes that are not UTF-8 in two comments, the first on line 1, and no
    coding line: Python's tokenizer never decodes a comment, so the module imports."""
    reference = hostile.REFERENCE.encode("utf-8")
    assert reference.count(b"not 0 / 0\n") == 1, "softmax's return line changed: mark another"
    return written_not_utf8(folder, INVALID_UTF8.lstrip() + reference.replace(b"not 0 / 0\n", b"not 0 / 0" + INVALID_UTF8))


def test_bytes_that_do_not_decode_in_a_comment_are_read_as_python_reads_them(tmp_path):
    module = invalid_utf8_reference(tmp_path)
    assert "not UTF-8, and no coding line" in learner_source(module)
    location = function_location(module, "softmax")
    assert location is not None and "not 0 / 0" in location["code"], location
    string = tmp_path / "string.py"
    string.write_bytes(b'NAME = "\xe9"\n')          # in a string, Python refuses them: so does the reader
    with pytest.raises(SyntaxError):
        learner_source(string)


def test_exercise_06s_structure_reads_the_module_as_python_reads_it(tmp_path):
    """06's structural tests read the learner's module in the test process: a comment that does not
    decode costs nothing there either."""
    structure = sibling_module(COURSE.hidden / "06_error_analysis" / "structure.py", "structure")
    module = tmp_path / "analysis.py"
    module.write_bytes(INVALID_UTF8.lstrip() + COURSE.task_named("06").reference_module.read_bytes())
    source = structure.Source(module)
    assert "paired" in source.functions and "not UTF-8, and no coding line" in source.text


@pytest.mark.full       # the reader's decoding is tested above in the default tier
def test_a_reference_with_undecodable_comments_gets_full_marks(tmp_path):
    invalid_utf8_reference(tmp_path / "learner")
    report = runner.run(runner.GradingRun(tmp_path / "learner", [COURSE.task_named("01")]))
    lost = [(t.id, t.feedback) for t in report.tests() if t.lost]
    assert not lost, lost
    assert report.total.points == report.total.max_points > 0 and report.complete, report.problems
