"""What a learner reads when a visible test fails under plain `pytest`: the grader's feedback (the
README section to reread last), their own line (the `return` that gave a wrong value, or the line
that raised), values written as they would write them, and no frame of the course's code unless
they ask with `--full-trace`."""
import subprocess
import sys

import numpy as np
import pytest

from grader.course import COURSE
from grader.suite.checks import assert_close, assert_equal, plain
from grader.worker.loading import function_location

TASK = COURSE.task_named("01")
RIGHT = "    return x.transpose(0, 2, 1, 3).reshape(batch, seq, n_heads * d_head)\n"
WRONG = "    return x.transpose(0, 1, 2, 3).reshape(batch, seq, n_heads * d_head)\n"


def planted(tmp_path):
    """The reference of exercise 01 with merge_heads transposing the wrong axes (its one return)."""
    source = (COURSE.solutions / TASK.name / f"{TASK.module}.py").read_text(encoding="utf-8")
    assert source.count(RIGHT) == 1, "merge_heads' return changed: plant the bug elsewhere"
    folder = tmp_path / "impl" / TASK.name
    folder.mkdir(parents=True)
    (folder / f"{TASK.module}.py").write_text(source.replace(RIGHT, WRONG), encoding="utf-8")
    return folder.parent, source.splitlines().index(RIGHT.rstrip("\n")) + 1


def visible_run(impl, *extra):
    return subprocess.run([sys.executable, "-m", "pytest", str(TASK.exercise_dir), "--impl", str(impl), "-q",
                           "-p", "no:cacheprovider", "-k", "split_heads_shape", *extra],
                          cwd=COURSE.root, capture_output=True, text=True, timeout=300)


def test_a_failing_visible_test_shows_the_feedback_and_the_learners_line_only(tmp_path):
    impl, line = planted(tmp_path)
    out = visible_run(impl).stdout
    failure = out.split(" FAILURES ", 1)[1].split(" score ", 1)[0]
    assert 'Reread: README section "Heads: reshape and transpose".' in failure, failure
    assert f"Your line {line}, in merge_heads: {WRONG.strip()}" in failure, failure
    assert "got 8.0, expected 2.0" in failure, failure
    assert "np.float64" not in failure and "def test_" not in failure and "grader/" not in failure, failure
    assert "--full-trace" in failure
    full = visible_run(impl, "--full-trace").stdout
    assert "def test_split_heads_shape_and_round_trip" in full and "grader/suite" in full


def test_the_line_that_gave_a_result_is_its_one_return(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def one(x):\n"
                      "    def inner():\n"
                      "        return 1\n"
                      "    y = [lambda: 2]\n"
                      "    return x + inner()\n"
                      "\n"
                      "def several(x):\n"
                      "    if x:\n"
                      "        return 1\n"
                      "    return 2\n"
                      "\n"
                      "def none(x):\n"
                      "    print(x)\n", encoding="utf-8")
    assert function_location(module, "one") == {"line": 5, "function": "one", "code": "return x + inner()"}
    assert function_location(module, "several")["line"] == 7         # which return gave it is not known: the def
    assert function_location(module, "none")["line"] == 12
    assert function_location(module, "absent") is None


def test_values_read_as_written():
    assert [plain(np.float64(8.0)), plain(np.int64(0)), plain(np.bool_(True)), plain("a")] == ["8.0", "0", "True", "'a'"]
    with pytest.raises(AssertionError) as equal:
        assert_equal(np.array(3), np.array(4), what="a count")
    assert str(equal.value) == "a count: 1 of 1 entries differ: got 3, expected 4"
    with pytest.raises(AssertionError) as close:
        assert_close(np.array(1.5), np.array(1.0), what="a loss", rtol=0.0, atol=1e-6)
    assert "index ()" not in str(close.value) and "got 1.5, expected 1" in str(close.value)


def test_a_visible_tests_own_words_come_without_pytests_internals():
    from grader.session.outcome import exception_outcome
    rewritten = AssertionError("lr_at(0) = 0.1, expected 0.0\nassert False\n +  where False = isclose(0.1, 0.0)")
    bare = AssertionError("assert 0.1 == 0.0\n +  where 0.1 = lr(0)")
    assert exception_outcome("call", rewritten, hidden=False)[1] == "lr_at(0) = 0.1, expected 0.0"
    assert exception_outcome("call", bare, hidden=False)[1].startswith("assert 0.1 == 0.0")    # nothing else to say
    assert exception_outcome("call", bare, hidden=True)[1] == "a check failed"                 # a hidden test's code, never
    assert exception_outcome("call", rewritten, hidden=True)[1] == "lr_at(0) = 0.1, expected 0.0"
