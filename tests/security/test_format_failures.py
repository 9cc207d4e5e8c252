"""One submission's data must never stop the pages of others, nor the other formats of its own.

Exercise 05's `step_breakdown` names each step; a learner who names them in mathtext
(`$\\undefinedmacro{x}$`) once made the HTML figure raise, which ended `grader grade` before the
next learners' pages, the class summary, or a single submission's Gradescope results were
written. Figures now draw text as text; and a format that fails for one submission, for whatever
reason, costs that submission that file alone: said on stderr and in its gradebook row, the exit
status 3, everything else written.
"""
import csv
import json
import os
import subprocess
import sys

import pytest

from grader import cli
from grader.course import COURSE
from grader.reports import html
from grader.worker.loading import sibling_module

hostile = sibling_module(__file__, "hostile")

MATHTEXT_STEPS = '''

_step_breakdown = step_breakdown


def step_breakdown(trace):
    return [{**row, "step": "$\\\\undefinedmacro{x}$"} for row in _step_breakdown(trace)]
'''


def test_a_mathtext_step_name_costs_no_output_of_a_single_grading(tmp_path):
    module = tmp_path / "sub" / "05_profiler_reading" / "profiling.py"
    module.parent.mkdir(parents=True)
    module.write_text((COURSE.solutions / "05_profiler_reading" / "profiling.py").read_text(encoding="utf-8")
                      + MATHTEXT_STEPS, encoding="utf-8")
    out = {name: tmp_path / name for name in ("results.json", "report.html", "score_report.json")}
    done = subprocess.run([sys.executable, "-m", "grader.cli", "grade", tmp_path / "sub", "--tasks", "05",
                           "--gradescope", out["results.json"], "--html", out["report.html"],
                           "--json", out["score_report.json"]],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out["score_report.json"].read_text(encoding="utf-8"))
    (recorded,) = [t for task in report["tasks"] for t in task["tests"] if t["artifacts"].get("step_breakdown")]
    assert {row["step"] for row in recorded["artifacts"]["step_breakdown"]["steps"]} == {"$\\undefinedmacro{x}$"}
    assert json.loads(out["results.json"].read_text(encoding="utf-8"))["score"] == report["total"]["points"]
    page = out["report.html"].read_text(encoding="utf-8")
    assert "your step breakdown" in page and "could not be drawn" not in page


@pytest.fixture
def mallory_breaks_the_page(monkeypatch):
    """The HTML renderer fails for Mallory's report (a renderer's bug her data finds), only hers."""
    render = html.report_html

    def report_html(report):
        if "mallory" in report.submission.get("path", ""):
            raise ValueError("a renderer failed on this learner's data")
        return render(report)
    monkeypatch.setattr(html, "report_html", report_html)


def stub_and_reference(tmp_path, *names):
    paths = []
    for name in names:
        module = tmp_path / "subs" / name / hostile.TASK / "attention.py"
        module.parent.mkdir(parents=True)
        module.write_text(hostile.STUB if name == "mallory" else hostile.REFERENCE, encoding="utf-8")
        paths.append(module.parent.parent)
    return paths


@pytest.mark.full       # a failing format is attacked in the default tier by a single grading's
def test_a_failing_page_costs_only_that_submissions_page(tmp_path, mallory_breaks_the_page, capsys):
    out = tmp_path / "grading"
    paths = stub_and_reference(tmp_path, "alice", "mallory", "bob")
    code = cli.main(["grade", *map(str, paths), "--tasks", "01", "--jobs", "2", "--out-dir", str(out)])
    stderr = capsys.readouterr().err
    assert code == cli.INCOMPLETE, stderr
    assert "HTML page" in stderr and "mallory" in stderr and "a renderer failed on this learner's data" in stderr
    assert (out / "alice" / "report.html").is_file() and (out / "bob" / "report.html").is_file()
    assert not (out / "mallory" / "report.html").exists()
    with open(out / "summary.csv", newline="", encoding="utf-8") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert "a renderer failed on this learner's data" in rows["mallory"]["problems"]
    assert rows["alice"]["problems"] == rows["bob"]["problems"] == ""
    assert [float(rows[n]["percent"]) for n in ("alice", "mallory", "bob")] == [100.0, 0.0, 100.0]
    with open(out / "concepts.csv", newline="", encoding="utf-8") as f:
        assert list(csv.DictReader(f))
    assert "Class summary" in (out / "class.html").read_text(encoding="utf-8")


@pytest.mark.full       # a failing format is attacked in the default tier by the mathtext step name
def test_a_failing_page_costs_a_single_grading_only_its_page(tmp_path, mallory_breaks_the_page, capsys):
    (path,) = stub_and_reference(tmp_path, "mallory")
    results, page, junit = tmp_path / "results.json", tmp_path / "report.html", tmp_path / "junit.xml"
    code = cli.main(["grade", str(path), "--tasks", "01", "--gradescope", str(results), "--html", str(page),
                     "--junit-xml", str(junit), "--json", str(tmp_path / "score_report.json")])
    stderr = capsys.readouterr().err
    assert code == cli.INCOMPLETE and "HTML report" in stderr, stderr
    gradescope = json.loads(results.read_text(encoding="utf-8"))
    assert gradescope["score"] == 0 and gradescope["tests"] and gradescope["extra_data"]["complete"]
    assert junit.is_file() and (tmp_path / "score_report.json").is_file() and not page.exists()
