"""`grader nbgrader`: the notebooks it writes, their test cells, and real nbgrader end to end.

The end-to-end tests run the instructor's pipeline on a temporary course: `grader nbgrader` ->
`nbgrader generate_assignment` for each exercise a test releases -> fake students in `submitted/` ->
`nbgrader autograde` -> `nbgrader export` -> `nbgrader generate_feedback`, and hold nbgrader's
scores against `grader grade`'s for the same modules. Exercise 01 runs in CI; the others are
marked slow (`pytest --run-slow`). Each step's time is printed (`pytest -s`).
"""
import ast
import copy
import csv
import html
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.course import COURSE
from grader.delivery import nbgrader as delivery
from grader.delivery.nbgrader_cells import NotebookError, SavedNotebook
from grader.delivery.nbgrader_kernel import OnlyLockedCells, locked_cell_sources
from grader.delivery.notebook import cell_source, module_file, module_source, nbgrader_metadata, read_notebook
from grader.running.variants import REFERENCE, reference_source, variants_of
from grader.worker.loading import sibling_module

hostile = sibling_module(str(Path(__file__).parent / "security" / "hostile.py"), "hostile")

TASKS = COURSE.tasks()
NBGRADER_BIN = Path(sys.executable).parent        # nbgrader calls `alembic` from its environment
E2E_TIMEOUT_S = 1800


# ---------------------------------------------------------------- the notebooks (no nbgrader needed)

@pytest.fixture(scope="module")
def suites():
    return delivery.collect_suites(list(TASKS))


@pytest.fixture(scope="module")
def notebooks(suites):
    return {task.name: delivery.build_notebook(task, suites[task.name]) for task in TASKS}


def statements(source: str) -> set[str]:
    """A module's top-level statements, docstring left out, as AST dumps (order and comments do
    not matter). A function or method whose solution region ends in the `return` the notebook
    adds before the stub's raise is compared without those two."""
    def without_stub_raise(function):
        if "NotImplementedError" in ast.dump(function.body[-1]) and len(function.body) > 2:
            function.body.pop()
            if isinstance(function.body[-1], ast.Return) and function.body[-1].value is None:
                function.body.pop()

    dumps = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        for function in [node] if isinstance(node, ast.FunctionDef) else getattr(node, "body", []):
            if isinstance(function, ast.FunctionDef):
                without_stub_raise(function)
        dumps.add(ast.dump(node))
    return dumps


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_the_source_notebooks_module_is_the_reference(task, notebooks):
    """The module file its cells make: a closing main guard is the stub's, out of the cells (the
    kernel would run it)."""
    cells = module_source(notebooks[task.name])
    assert "__main__" not in cells
    module = module_file(cells, (task.exercise_dir / f"{task.module}.py").read_text(encoding="utf-8"))
    reference = task.reference_module.read_text(encoding="utf-8")
    assert statements(module) == statements(reference)


def test_cells_with_a_main_guard_of_their_own_get_no_second_one():
    """A learner who ends the cells with the guard (torchrun runs the file) runs `main()` once."""
    stub = "def main():\n    pass\n\n\nif __name__ == \"__main__\":\n    main()\n"
    own = "def main():\n    print('go')\n\n\nif __name__ == '__main__':\n    main()\n"
    assert module_file(own, stub).count("__main__") == 1
    assert module_file("def main():\n    print('go')\n", stub).count("__main__") == 1
    assert module_file("def main(:\n", stub).endswith('if __name__ == "__main__":\n    main()\n')


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_each_visible_test_is_in_one_test_cell_worth_its_concepts_points(task, notebooks, suites):
    cells = [c for c in notebooks[task.name]["cells"] if nbgrader_metadata(c).get("grade")]
    visible_file = (task.exercise_dir / f"test_{task.module}.py").read_text(encoding="utf-8")
    for node in ast.parse(visible_file).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            holders = [c for c in cells if f"def {node.name}(" in cell_source(c)]
            assert len(holders) == 1, f"{node.name} is in {len(holders)} test cells"
            assert ast.get_source_segment(visible_file, node) in cell_source(holders[0])
    for cell in cells:
        call = next(n for n in ast.walk(ast.parse(cell_source(cell)))
                    if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "ConceptCell")
        concept = call.args[1].value
        declared = [t for t in suites[task.name] if t.concept == concept and not t.gpu]
        assert nbgrader_metadata(cell)["points"] == sum(t.points for t in declared) > 0
        assert delivery.BEGIN_HIDDEN in cell_source(cell)


def test_zh_cn_notebooks_carry_the_chinese_readme_around_the_same_cells(suites):
    task = COURSE.task_named("04")
    english = delivery.build_notebook(task, suites[task.name], "en")
    chinese = delivery.build_notebook(task, suites[task.name], "zh-CN")
    nbformat = pytest.importorskip("nbformat")
    for notebook in (english, chinese):
        nbformat.validate(nbformat.from_dict(notebook))
    assert [c["cell_type"] for c in english["cells"]] == [c["cell_type"] for c in chinese["cells"]]
    assert [nbgrader_metadata(c) for c in english["cells"]] == [nbgrader_metadata(c) for c in chinese["cells"]]
    assert module_source(english) != module_source(chinese)      # the helpers cell's comment is translated
    assert statements(module_source(english)) == statements(module_source(chinese))
    markdown = "\n".join(cell_source(c) for c in chinese["cells"] if c["cell_type"] == "markdown")
    assert "## 从 config 数参数（Parameters from a config）" in markdown
    assert "## Parameters from a config" not in markdown


def test_the_config_block_is_rewritten_and_the_instructors_settings_kept(tmp_path):
    config = tmp_path / "nbgrader_config.py"
    config.write_text('c = get_config()\nc.CourseDirectory.course_id = "ml-201"\nc.Exchange.root = "/srv/x"\n')
    delivery.update_config(tmp_path)
    delivery.update_config(tmp_path)
    text = config.read_text()
    assert text.count(delivery.CONFIG_BEGIN) == 1 and text.count(delivery.CONFIG_END) == 1
    assert 'course_id = "ml-201"' in text and 'c.Exchange.root = "/srv/x"' in text
    assert "c.OverwriteCells.add_missing_cells = True" in text and "grader.delivery.nbgrader_kernel" in text
    assert "--InteractiveShellApp.ignore_cwd=True" in text and "grader.delivery.nbgrader_execute" in text


def test_the_autograde_kernel_runs_only_the_notebooks_locked_cells(tmp_path, notebooks):
    notebook = copy.deepcopy(notebooks["01_einsum_attention"])
    (tmp_path / "01_einsum_attention.ipynb").write_text(json.dumps(notebook))
    allowed = locked_cell_sources(tmp_path)
    run_only = OnlyLockedCells(allowed)
    locked = [c for c in notebook["cells"] if c["cell_type"] == "code" and nbgrader_metadata(c).get("locked")]
    ids = [nbgrader_metadata(c)["grade_id"] for c in locked]
    assert "module-header" in ids and "test-helpers" in ids and sum(i.startswith("test-0") for i in ids) > 1, ids
    assert len(allowed) == len(locked)
    for source in map(cell_source, locked):       # the test cells, and what their decorators use
        lines = (source + "\n").splitlines(keepends=True)
        assert run_only(lines) == lines
    for cell in notebook["cells"]:                 # the learner's answers never run
        if cell["cell_type"] == "code" and not nbgrader_metadata(cell).get("locked"):
            assert nbgrader_metadata(cell).get("solution"), nbgrader_metadata(cell)
            assert run_only(cell_source(cell).splitlines(keepends=True)) == ["pass\n"]
    assert run_only(["import grader.delivery.nbgrader_cells as c\n", "c.ConceptCell.result = print\n"]) == ["pass\n"]


def test_a_test_cell_reads_the_saved_notebook_in_its_folder(tmp_path, monkeypatch, notebooks):
    task = COURSE.task_named("05")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    with pytest.raises(NotebookError, match="not found"):
        SavedNotebook.find(task)
    notebook = copy.deepcopy(notebooks[task.name])
    (tmp_path / f"{task.name}.ipynb").write_text(json.dumps(notebook))
    saved = SavedNotebook.find(task)
    assert saved.module == module_source(notebook) and "def profile_steps(" in saved.module
    assert saved.concepts[0] == "Recording a profile" and len(saved.concepts) == 6
    monkeypatch.setenv("JPY_SESSION_NAME", "work/my copy.ipynb")        # Jupyter names the notebook it runs
    notebook["cells"] = [c for c in notebook["cells"] if not nbgrader_metadata(c).get("solution")
                         and nbgrader_metadata(c).get("grade_id") != "module-header"]
    (tmp_path / "my copy.ipynb").write_text(json.dumps(notebook))
    with pytest.raises(NotebookError, match="no cells of the module profiling.py"):
        SavedNotebook.find(task)


def run_test_cell(notebook: dict, source: str):
    """Run a test cell's code as a kernel would, after the visible tests' helpers cell (which
    defines what the tests' decorators and bodies use); return the value of its last line."""
    namespace = {}
    helpers = next(c for c in notebook["cells"] if c.get("id") == "test-helpers")
    exec(compile(cell_source(helpers), "<helpers cell>", "exec"), namespace)
    body, last = source.rstrip().rsplit("\n", 1)
    exec(compile(body, "<test cell>", "exec"), namespace)
    return eval(last, namespace)


@pytest.mark.timeout(600)
def test_a_notebook_for_a_gpu_autograder_counts_gpu_tests_and_says_when_none_ran(tmp_path, monkeypatch, suites, capfd):
    task, concept = COURSE.task_named("01"), "Attention in torch"
    notebook = delivery.build_notebook(task, suites[task.name], count_gpu_tests=True)     # its module: the reference
    (tmp_path / f"{task.name}.ipynb").write_text(json.dumps(notebook))
    monkeypatch.chdir(tmp_path)
    cell = next(c for c in notebook["cells"] if nbgrader_metadata(c).get("grade") and f'"{concept}"' in cell_source(c))
    cpu = sum(t.points for t in suites[task.name] if t.concept == concept and not t.gpu)
    gpu = sum(t.points for t in suites[task.name] if t.concept == concept and t.gpu)
    assert gpu > 0 and nbgrader_metadata(cell)["points"] == cpu + gpu
    points = run_test_cell(notebook, cell_source(cell))             # the source copy: graded with the hidden suite
    out, err = capfd.readouterr()
    import torch
    if torch.cuda.is_available():
        assert points == cpu + gpu, out
    else:
        assert points == cpu, out
        assert f"GPU tests worth {gpu:g} points were not graded: this autograder has too few CUDA GPUs." in out
    assert err == ""                                       # nothing of the grading reached stderr


# ---------------------------------------------------------------- real nbgrader, end to end

def nbgrader_environment() -> dict:
    env = {**os.environ, "PATH": f"{NBGRADER_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    try:
        import nbconvert
    except ImportError:
        return env
    # nbconvert's templates (the feedback HTML) are data files of the environment that installed
    # it: `<prefix>/share/jupyter`, which is not sys.prefix when this venv borrows its packages.
    data = Path(nbconvert.__file__).resolve().parents[4] / "share" / "jupyter"
    if data.is_dir():
        env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(data), os.environ.get("JUPYTER_PATH")]))
    return env


def _nbgrader_missing() -> str | None:
    try:
        import nbgrader  # noqa: F401
    except ImportError:
        return "nbgrader is not installed: pip install -c constraints.txt -e '.[instructor]'"
    if shutil.which("alembic", path=nbgrader_environment()["PATH"]) is None:
        return "nbgrader needs its `alembic` command beside this Python"
    return None


needs_nbgrader = pytest.mark.skipif(_nbgrader_missing() is not None, reason=str(_nbgrader_missing()))


class Classroom:
    """A temporary nbgrader course written by `grader nbgrader`, each exercise's assignment
    generated when a test first reads its released notebook."""

    def __init__(self, root: Path):
        self.root = root
        self.generated: set[str] = set()
        self.timings: list[tuple[str, float]] = []
        self.tmp = root.parent / "tmp"        # the temporary folder of every command, watched for leftovers
        self.tmp.mkdir(parents=True, exist_ok=True)

    def run(self, step: str, command: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
        start = time.perf_counter()
        done = subprocess.run(command, cwd=cwd or self.root, env={**nbgrader_environment(), "TMPDIR": str(self.tmp)},
                              capture_output=True, text=True, timeout=E2E_TIMEOUT_S)
        seconds = time.perf_counter() - start
        self.timings.append((step, seconds))
        print(f"  {step:<58} {seconds:7.1f} s")
        assert done.returncode == 0, f"{step} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        return done

    def nbgrader(self, step: str, *args: str) -> subprocess.CompletedProcess:
        return self.run(step, [sys.executable, "-m", "nbgrader", *args])

    def grader(self, step: str, *args) -> subprocess.CompletedProcess:
        return self.run(step, [sys.executable, "-m", "grader.cli", *map(str, args)], cwd=COURSE.root)

    def notebook(self, step: str, task, student: str | None = None) -> dict:
        if task.name not in self.generated:
            self.nbgrader(f"nbgrader generate_assignment {task.name}", "generate_assignment", task.name)
            self.generated.add(task.name)
        folder = self.root / step / (student or ".") / task.name
        return read_notebook(folder / f"{task.name}.ipynb")


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    room = Classroom(tmp_path_factory.mktemp("classroom") / "course")
    print()
    room.grader("grader nbgrader (all exercises)", "nbgrader", room.root)
    return room


def lines_of(*texts: str, shortest: int = 0) -> set[str]:
    return {line.strip() for text in texts for line in text.splitlines() if len(line.strip()) >= shortest}


def hidden_only_lines(task) -> set[str]:
    """Lines of the task's hidden suite folder that nothing shown to a learner contains (import
    lines aside: naming a library reveals nothing of a suite)."""
    hidden = lines_of(*(p.read_text(encoding="utf-8") for p in sorted(task.hidden_dir.rglob("*.py"))), shortest=25)
    hidden = {line for line in hidden if not line.startswith(("import ", "from "))}
    shown = [task.exercise_dir / f"{task.module}.py", task.exercise_dir / f"test_{task.module}.py",
             *task.exercise_dir.glob("README*.md"), task.reference_module]
    shown_text = "\n".join(p.read_text(encoding="utf-8") for p in shown)
    return {line for line in hidden if line not in shown_text}


@needs_nbgrader
@pytest.mark.timeout(E2E_TIMEOUT_S)
# The default tier releases exercise 01 (the one it autogrades); the full tier every exercise.
@pytest.mark.parametrize("task", [pytest.param(t, marks=[] if t.name.startswith("01") else [pytest.mark.full])
                                  for t in TASKS], ids=[t.name for t in TASKS])
def test_released_notebooks_hold_the_stub_and_no_reference_or_hidden_source(task, classroom):
    released = classroom.notebook("release", task)
    text = "\n".join(cell_source(c) for c in released["cells"])
    stub = (task.exercise_dir / f"{task.module}.py").read_text(encoding="utf-8")
    reference = reference_source(task)
    assert statements(module_file(module_source(released), stub)) == statements(stub)
    shown = [task.exercise_dir / f"test_{task.module}.py", *task.exercise_dir.glob("README*.md")]
    reference_only = lines_of(reference, shortest=12) - lines_of(stub, *(p.read_text(encoding="utf-8") for p in shown))
    assert not [line for line in reference_only if line in lines_of(text)]
    assert not [line for line in hidden_only_lines(task) if line in text]
    assert "grade_with_hidden_suite" not in text
    assert "grade_with_hidden_suite" in "\n".join(cell_source(c) for c in classroom.notebook("source", task)["cells"])


NOISE = ("import sys, warnings\n\n"
         "print('loading my module', file=sys.stderr)\n"
         "warnings.warn('my module is a work in progress')\n\n")
TAMPERING = ("# Learner code that must not run in the autograde kernel.\n"
             "open('learner_code_ran.txt', 'w').write('it ran')\n"
             "import grader.delivery.nbgrader_cells as cells\n"
             "cells.ConceptCell.result = lambda self: self.points\n")


def submit(classroom: Classroom, task, student: str, notebook: dict) -> None:
    folder = classroom.root / "submitted" / student / task.name
    folder.mkdir(parents=True)
    (folder / f"{task.name}.ipynb").write_text(json.dumps(notebook, indent=1))
    (folder / "timestamp.txt").write_text("2026-11-30 09:00:00.000000 UTC")


def submit_with_shadows(classroom: Classroom, task, student: str, notebook: dict) -> Path:
    """The notebook beside files named like modules the autograde kernel imports; returns the
    folder where each one, if imported, leaves its mark."""
    submit(classroom, task, student, notebook)
    marks = classroom.root / "marks" / task.name
    marks.mkdir(parents=True)
    for name, module in hostile.NOTEBOOK_SHADOWS.items():
        path = classroom.root / "submitted" / student / task.name / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(hostile.notebook_shadow(name, marks / module), encoding="utf-8")
    return marks


def tamper(notebook: dict, concept_cell: str, deleted_cell: str) -> dict:
    """A learner who claims full points in one test cell, deletes another, edits the locked
    header and adds a cell of their own at the top."""
    notebook = copy.deepcopy(notebook)
    cells = notebook["cells"]
    for cell in cells:
        meta = nbgrader_metadata(cell)
        if meta.get("grade_id") == concept_cell:
            cell["source"] = f"print('all tests passed')\n{meta['points']}\n"
        if meta.get("grade_id") == "module-header":
            cell["source"] = cell_source(cell) + "\nraise SystemExit('edited header')\n"
    notebook["cells"] = [{"cell_type": "code", "id": "learner-cell", "metadata": {}, "execution_count": None,
                          "outputs": [], "source": TAMPERING}] + \
                        [c for c in cells if nbgrader_metadata(c).get("grade_id") != deleted_cell]
    return notebook


def grade_cell_id(notebook: dict, concept: str) -> str:
    return next(nbgrader_metadata(c)["grade_id"] for c in notebook["cells"]
                if nbgrader_metadata(c).get("grade") and f'"{concept}"' in cell_source(c))


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@needs_nbgrader
@pytest.mark.timeout(E2E_TIMEOUT_S)
@pytest.mark.parametrize("task", [pytest.param(t, marks=[] if t.name.startswith("01") else [pytest.mark.slow])
                                  for t in TASKS], ids=[t.name for t in TASKS])
def test_autograde_scores_equal_grader_grade_and_feedback_hides_the_suite(task, classroom, tmp_path):
    released, source = classroom.notebook("release", task), classroom.notebook("source", task)
    mutant = next(v for v in variants_of(task) if v.kind == "mutant" and v.base == REFERENCE)
    concept_cell = grade_cell_id(released, mutant.concept)
    deleted_cell = next(nbgrader_metadata(c)["grade_id"] for c in reversed(released["cells"])
                        if nbgrader_metadata(c).get("grade") and nbgrader_metadata(c)["grade_id"] != concept_cell)
    students = {
        "reference": delivery.submission_notebook(released, task, reference_source(task)),
        "stub": released,
        "mutant": tamper(delivery.submission_notebook(released, task, NOISE + mutant.apply(reference_source(task))),
                         concept_cell, deleted_cell),
    }
    for student, notebook in students.items():
        submit(classroom, task, student, notebook)
    marks = submit_with_shadows(classroom, task, "shadows", released)      # the untouched stub
    classroom.nbgrader(f"nbgrader autograde {task.name} (4 submissions)", "autograde", task.name)
    classroom.nbgrader("nbgrader export", "export")
    left = sorted(p.name for p in classroom.tmp.glob("grader-notebook-*"))
    assert not left, f"the autograde kernels left the submissions they graded in the temporary folder: {left}"

    # files beside the stub named like the kernel's imports were not imported: the stub's 0
    assert sorted(p.name for p in marks.iterdir()) == [], "the autograde kernel imported learner files"
    shadowed = next(row for row in read_csv(classroom.root / "grades.csv")
                    if row["assignment"] == task.name and row["student_id"] == "shadows")
    assert float(shadowed["score"]) == 0, shadowed

    # nbgrader's overwrite step restored the tamperer's locked cells, and nothing of theirs ran in the kernel
    graded = {student: classroom.notebook("autograded", task, student) for student in students}
    by_id = {nbgrader_metadata(c).get("grade_id"): cell_source(c) for c in graded["mutant"]["cells"]}
    originals = {nbgrader_metadata(c).get("grade_id"): cell_source(c) for c in source["cells"]}
    for restored in (concept_cell, deleted_cell, "module-header"):
        assert originals[restored] in by_id[restored], f"{restored} was not restored"
    assert not (classroom.root / "autograded" / "mutant" / task.name / "learner_code_ran.txt").exists()
    for student, notebook in graded.items():
        for cell in notebook["cells"]:
            if nbgrader_metadata(cell).get("grade"):
                kinds = [(o["output_type"], o.get("name")) for o in cell["outputs"]]
                assert ("stream", "stderr") not in kinds and "error" not in [k for k, _ in kinds], (student, kinds)
                assert kinds[-1] == ("execute_result", None), (student, nbgrader_metadata(cell)["grade_id"], kinds)

    # the same modules, graded by `grader grade`, score the same to the point
    trees = tmp_path / "modules"
    for student, notebook in graded.items():
        (trees / student / task.name).mkdir(parents=True)
        module = module_file(module_source(notebook), (task.exercise_dir / f"{task.module}.py").read_text(encoding="utf-8"))
        (trees / student / task.name / f"{task.module}.py").write_text(module, encoding="utf-8")
    out = tmp_path / "grading"
    classroom.grader("grader grade --jobs 2 (the 3 modules and solutions/)", "grade",
                     *(trees / s for s in students), COURSE.solutions, "--tasks", task.name, "--jobs", "2", "--out-dir", out)
    grader_rows = {row["submission"]: row for row in read_csv(out / "summary.csv")}
    nbgrader_rows = {row["student_id"]: row for row in read_csv(classroom.root / "grades.csv")
                     if row["assignment"] == task.name}
    table = []
    for student in students:
        ours, theirs = grader_rows[student], nbgrader_rows[student]
        table.append(f"{task.name} {student:<10} grader {float(ours[task.name]):6g} / {float(ours['max_points']):g}"
                     f"   nbgrader {float(theirs['score']):6g} / {float(theirs['max_score']):g}")
        assert float(theirs["score"]) == float(ours[task.name]), table[-1]
        assert float(theirs["max_score"]) == float(ours["max_points"]), table[-1]
    print("\n".join(["  scores:", *("    " + line for line in table)]))
    full = float(grader_rows["solutions"][task.name])
    assert float(nbgrader_rows["reference"]["score"]) == full == float(grader_rows["solutions"]["max_points"])
    assert float(nbgrader_rows["stub"]["score"]) == 0
    assert 0 <= float(nbgrader_rows["mutant"]["score"]) < full

    # the feedback names what the mutant broke and shows no hidden source
    classroom.nbgrader(f"nbgrader generate_feedback {task.name}", "generate_feedback", task.name)
    feedback = {s: html.unescape((classroom.root / "feedback" / s / task.name / f"{task.name}.html")
                                 .read_text(encoding="utf-8")) for s in students}
    report = json.loads((out / "mutant" / "score_report.json").read_text(encoding="utf-8"))
    lost = [t for t in report["tasks"][0]["tests"] if t["graded"] and t["status"] != "passed"]
    assert lost and any(t["concept"] == mutant.concept for t in lost)
    for test in lost:       # what was checked, and where to reread (the values may differ: 05 profiles anew)
        lines = test["feedback"].splitlines()
        for shown in (test["title"], lines[0].split(": ")[0], lines[-1] if "Reread" in lines[-1] else ""):
            assert shown in feedback["mutant"], (shown, test["feedback"])
    hidden = hidden_only_lines(task)
    for student, page in feedback.items():
        assert not [line for line in hidden if line in page], student


@needs_nbgrader
@pytest.mark.timeout(E2E_TIMEOUT_S)
def test_validate_reports_the_visible_tests_of_a_released_notebook(classroom, tmp_path):
    task = COURSE.task_named("01")
    released = classroom.notebook("release", task)
    cases = {"stub": released,
             "noisy_reference": delivery.submission_notebook(released, task, NOISE + reference_source(task))}
    outputs = {}
    for name, notebook in cases.items():
        path = tmp_path / name / f"{task.name}.ipynb"
        path.parent.mkdir()
        path.write_text(json.dumps(notebook, indent=1))
        outputs[name] = classroom.nbgrader(f"nbgrader validate ({name})", "validate", str(path)).stdout
    assert "Success! Your notebook passes all the tests." in outputs["noisy_reference"], outputs["noisy_reference"]
    stub = outputs["stub"]
    assert "VALIDATION FAILED" in stub
    assert "visible tests of 'Stable softmax' failed" in stub
    assert "softmax() is not implemented yet" in stub
