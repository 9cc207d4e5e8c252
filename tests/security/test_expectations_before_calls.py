"""A hidden test's expected values never come from a file the worker may write. Exercise 06's
inputs lie in the test's temporary folder, which the worker writes (files cross as paths): two
tests once compared the rows with the input file's order read *after* the learner's call, so a
`load_results` that sorts by id (a real bug) and rewrites its input in that order passed them.

The scan holds every hidden suite to the rule; the attack grades the rewrite against the same
bug without it."""
import ast
from pathlib import Path

import pytest

from grader.course import COURSE
from grader.running import runner
from grader.worker.loading import sibling_module

attacks = sibling_module(__file__, "attacks")

FILE_READERS = {"file_order", "read_text", "read_bytes", "open", "load", "read_csv", "read_json", "read_parquet",
                "load_file"}
ORDER_TESTS = ("test_correct_matches_python_string_methods", "test_digit_answers_and_ids_stay_text")


def _callee(call: ast.Call) -> str:
    function = call.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


def _first_learner_call(test: ast.FunctionDef) -> int | None:
    """The line of the test's first call of learner code: `submission.f(...)`, or a helper handed `submission`."""
    lines = [node.lineno for node in ast.walk(test) if isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Attribute) and getattr(node.func.value, "id", None) == "submission")
        or any(getattr(argument, "id", None) == "submission" for argument in node.args))]
    return min(lines, default=None)


def reads_after_learner_calls(source: str) -> list[str]:
    """Each assertion, after a test's first learner call, whose condition reads a file."""
    found = []
    for test in ast.parse(source).body:
        if not (isinstance(test, ast.FunctionDef) and test.name.startswith("test_")):
            continue
        first = _first_learner_call(test)
        for node in ast.walk(test):
            if isinstance(node, ast.Assert) and first is not None and node.lineno > first:
                found += [f"{test.name} line {node.lineno}: {ast.unparse(call)}" for call in ast.walk(node.test)
                          if isinstance(call, ast.Call) and _callee(call) in FILE_READERS]
    return found


def test_the_scan_finds_an_expectation_read_after_the_call():
    before_the_fix = '''
def test_order(submission, tmp_path):
    path = write_input(tmp_path)
    rows = rows_of(submission, "load_results", path)
    assert [row["id"] for row in rows] == runs.file_order(path), "rows in the file's order"
'''
    assert reads_after_learner_calls(before_the_fix) == \
        ["test_order line 5: runs.file_order(path)"]
    after_the_fix = before_the_fix.replace('    rows = rows_of', '    order = runs.file_order(path)\n    rows = rows_of') \
                                  .replace("== runs.file_order(path)", "== order")
    assert reads_after_learner_calls(after_the_fix) == []


def test_no_hidden_suite_reads_an_expectation_after_a_learner_call():
    suites = sorted(Path(COURSE.root, "tests", "hidden").rglob("test_*.py"))
    assert suites
    found = [f"{suite.relative_to(COURSE.root)}: {hit}" for suite in suites
             for hit in reads_after_learner_calls(suite.read_text(encoding="utf-8"))]
    assert not found, "expected values read from files after the learner's code ran:\n" + "\n".join(found)


SORTED_BY_ID = '''

_load_results_in_file_order = load_results


def load_results(path, model, normalize=("strip",)):
    """The bug: rows sorted by id, not in the file's order{rewrite_doc}."""
    table = _load_results_in_file_order(path, model, normalize).sort_values("id", kind="stable")
    table = table.reset_index(drop=True)
{rewrite}    return table
'''
REWRITE = '''    import json
    with open(path, encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(record) + "\\n" for record in sorted(records, key=lambda r: r["id"]))
'''


def graded_order_tests(folder: Path, rewrite: bool) -> float:
    task = COURSE.task_named("06")
    bug = SORTED_BY_ID.format(rewrite_doc=", and the input rewritten in that order" if rewrite else "",
                              rewrite=REWRITE if rewrite else "")
    attacks.course_layout(folder, {"06": task.reference_module.read_text(encoding="utf-8") + bug})
    report = runner.run(runner.GradingRun(folder, [task], extra_args=["-k", " or ".join(ORDER_TESTS)]))
    assert {t.id.split("::")[-1] for t in report.tests()} == set(ORDER_TESTS), [t.id for t in report.tests()]
    return report.total.points


@pytest.mark.full       # the scan above holds the suites to the rule in the default tier
def test_rewriting_the_input_earns_what_the_bug_earns(tmp_path):
    bug = graded_order_tests(tmp_path / "bug", rewrite=False)
    rewritten = graded_order_tests(tmp_path / "rewritten", rewrite=True)
    assert bug == 0, f"sorting by id is the bug these tests catch: it earned {bug}"
    assert rewritten == bug, f"rewriting its input in the order it returns earned {rewritten}, the bug alone {bug}"
