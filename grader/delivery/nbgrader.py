"""`grader nbgrader`: the course as an nbgrader course directory, one assignment per exercise.

For each task it writes `source/<task>/<task>.ipynb` (nothing else: nbgrader releases every file
of that folder, so the hidden suites stay in the installed course, where the test cells find
them) and keeps our block of settings in `nbgrader_config.py`. The notebook, top to bottom:

- the README's introduction and a note on how the notebook works;
- the learner's module as code cells (`grader.delivery.notebook`): the stub's header, locked; a
  helpers cell; then each README section followed by the functions whose stub points to it,
  each an autograded-answer cell whose solution region holds the reference's body. The region
  is followed by the stub's own `raise NotImplementedError(...)`, so nbgrader's
  `generate_assignment` (our config makes its code stub a comment) releases exactly the stub,
  while the source version returns before reaching that line. The reference's private helpers
  sit in the helpers cell's region;
- the visible tests' helpers, then one locked test cell per concept, worth the concept's points:
  the concept's visible tests, verbatim, and a one-line call into the graded suite inside
  `### BEGIN HIDDEN TESTS` (see `grader.delivery.nbgrader_cells`).

Points, concepts and GPU marks come from collecting the course's suites with pytest, the same
collection a grading does.
"""
from __future__ import annotations

import contextlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

from grader.course import COURSE, Task
from grader.delivery.course_sources import (
    BEGIN_SOLUTION,
    END_SOLUTION,
    BuildError,
    module_cells,
    readme_in,
    visible_test_parts,
)
from grader.delivery.notebook import MODULE_CELL_PREFIX, NBGRADER_SCHEMA_VERSION
from grader.running.runner import RUN_LIMIT_S
from grader.suite import metadata

LANGUAGES = ("en", "zh-CN")
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
CONFIG_BEGIN = "# >>> grader nbgrader >>>"
CONFIG_END = "# <<< grader nbgrader <<<"
COURSE_ID = "l1-exercises"


# ---------------------------------------------------------------- the course's suites

@dataclass(frozen=True)
class SuiteTest:
    nodeid: str
    task: str
    suite: str          # "visible" or "hidden"
    function: str
    points: float
    concept: str
    gpu: bool


class _Collector:
    def __init__(self):
        self.tests: list[SuiteTest] = []

    def pytest_collection_finish(self, session):
        for item in session.items:
            task = COURSE.task_of_path(item.path)
            meta = metadata.of_item(item)
            if task is None or meta.points is None or meta.concept is None:
                raise BuildError(f"{item.nodeid}: every test of a task declares its points and concept")
            suite = "hidden" if Path(item.path).resolve().is_relative_to(COURSE.hidden) else "visible"
            self.tests.append(SuiteTest(item.nodeid, task.name, suite, item.originalname, meta.points,
                                        meta.concept, meta.gpu))


def collect_suites(tasks: list[Task]) -> dict[str, list[SuiteTest]]:
    """Every test of the tasks' visible and hidden suites, as pytest collects them."""
    import pytest
    collector = _Collector()
    paths = [str(p) for task in tasks for p in task.suite_paths(hidden=True)]
    args = [*paths, "--collect-only", "-q", *COURSE.session_options(), "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    log = io.StringIO()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        code = pytest.main(args, plugins=[collector])
    if code != 0:
        raise BuildError(f"collecting the suites failed (pytest exit {int(code)}):\n{log.getvalue()[-2000:]}")
    return {task.name: [t for t in collector.tests if t.task == task.name] for task in tasks}


# ---------------------------------------------------------------- words in the notebook

TEXT = {
    "en": {
        "preface": """## How this notebook works

- The code cells from the locked header to the last function make up your module `{module}.py`.
  Write your solution where it says `# YOUR CODE HERE`, inside those cells; put helpers of your
  own in the *helpers* cell. Cells you add yourself are not part of the module.
- The test cells at the end run the visible tests of each concept on the module **as saved**:
  save the notebook before you run them. `nbgrader validate` (the *Validate* button) runs them all.
- Each test cell is worth the points of its concept. When your work is graded, the course's
  graded suite checks much more than the visible tests, with inputs you do not see, and its
  feedback names the README section to reread.
- Keep the locked cells as they are: the autograder restores them.""",
        "helpers": "# Helpers: functions and constants of your own that the functions below use (optional).",
        "tests": """## Tests

One cell per concept of the README, worth that concept's points. Run the cell of the visible
tests' helpers first.""",
        "gpu_left_out": "The graded suite also has GPU tests worth {points:g} points; this notebook is graded on a "
                        "machine without a GPU, so they are not part of its grade.",
        "test_helpers": "# Helpers of the visible tests ({file}): run this cell before the test cells.",
        "test_cell": "# Tests of \"{concept}\", worth {points:g} points: its visible tests, and the graded suite "
                     "when graded.",
    },
    "zh-CN": {
        "preface": """## 这个 notebook 怎么用

- 从锁定的开头单元到最后一个函数，这些代码单元合起来就是你的模块 `{module}.py`。
  在这些单元里标着 `# YOUR CODE HERE` 的地方写答案；自己的辅助函数放进 *helpers* 单元。
  你自己新加的单元不属于模块。
- 最后的测试单元会对**已保存的**模块运行每个概念的可见测试：运行前先保存 notebook。
  `nbgrader validate`（*Validate* 按钮）会把它们全部运行一遍。
- 每个测试单元的分值就是该概念的分值。正式评分时，课程的评分套件会用你看不到的输入检查比可见测试多得多的内容，
  反馈会告诉你该重读 README 的哪一节。
- 不要改动锁定的单元：自动评分会把它们恢复原样。""",
        "helpers": "# Helpers：下面的函数要用到的你自己的函数和常量（可选）。",
        "tests": """## 测试

README 的每个概念一个单元，分值就是该概念的分值。先运行可见测试的辅助单元。""",
        "gpu_left_out": "评分套件还有价值 {points:g} 分的 GPU 测试；这个 notebook 在没有 GPU 的机器上评分，"
                        "这部分不计入成绩。",
        "test_helpers": "# 可见测试的辅助代码（{file}）：先运行这个单元，再运行测试单元。",
        "test_cell": "# “{concept}”的测试，共 {points:g} 分：它的可见测试；正式评分时还有评分套件。",
    },
}


# ---------------------------------------------------------------- the notebook

def build_notebook(task: Task, tests: list[SuiteTest], lang: str = "en", count_gpu_tests: bool = False) -> dict:
    """The source notebook of one task (nbformat 4.5, nbgrader schema 3)."""
    text = TEXT[lang]
    intro, sections = readme_in(task, lang)
    cells = [_markdown(intro), _markdown(text["preface"].format(module=task.module)),
             *_module_part(task, sections, text),
             *_tests_part(task, tests, [heading for heading, _ in sections], count_gpu_tests, text)]
    for index, cell in enumerate(cells):
        cell["id"] = cell["id"] or f"cell-{index:03d}"     # nbformat 4.5 ids, stable across rewrites
    return {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                        "name": "python3"},
                         "language_info": {"name": "python"}}}


def _module_part(task: Task, sections, text) -> list[dict]:
    """The header, the helpers cell, then each README section with the functions it explains."""
    try:
        module = module_cells(_read(task.exercise_dir / f"{task.module}.py"),
                              _read(task.reference_module))
    except BuildError as exc:
        raise BuildError(f"{task.name}: {exc}") from None
    helpers = "\n".join([text["helpers"], BEGIN_SOLUTION, *filter(None, [module.helpers]), END_SOLUTION])
    cells = [_code(module.header, _locked(f"{MODULE_CELL_PREFIX}header")),
             _code(helpers, _answer(f"{MODULE_CELL_PREFIX}helpers"))]
    headings = {heading for heading, _ in sections}
    for heading, body in sections:
        cells.append(_markdown(body))
        cells += [_code(f.source, _answer(f"{MODULE_CELL_PREFIX}{f.name}")) for f in module.functions
                  if f.section == heading]
    cells += [_code(f.source, _answer(f"{MODULE_CELL_PREFIX}{f.name}")) for f in module.functions
              if f.section not in headings]
    return cells


def _tests_part(task: Task, tests: list[SuiteTest], headings: list[str], count_gpu_tests: bool, text) -> list[dict]:
    """The Tests heading, the visible tests' helpers, then a test cell per concept in README order."""
    visible_file = task.exercise_dir / f"test_{task.module}.py"
    functions = list(dict.fromkeys(t.function for t in tests if t.suite == "visible"))
    test_helpers, test_sources = visible_test_parts(visible_file, functions)
    gpu_left_out = 0.0 if count_gpu_tests else sum(t.points for t in tests if t.gpu)
    note = "\n\n" + text["gpu_left_out"].format(points=gpu_left_out) if gpu_left_out else ""
    cells = [_markdown(text["tests"] + note),
             _code(f"{text['test_helpers'].format(file=visible_file.name)}\n{test_helpers}", _locked("test-helpers"),
                   read_only=True)]
    concepts = sorted(dict.fromkeys(t.concept for t in tests),
                      key=lambda c: headings.index(c) if c in headings else len(headings))
    for index, concept in enumerate(concepts):
        of_concept = [t for t in tests if t.concept == concept]
        points = sum(t.points for t in of_concept if count_gpu_tests or not t.gpu)
        if points == 0:
            continue         # GPU tests only, left out: the Tests heading says so
        gpu_points = sum(t.points for t in of_concept if t.gpu)
        visible = list(dict.fromkeys(t.function for t in of_concept if t.suite == "visible"))
        source = _test_cell(task, concept, points, gpu_points, count_gpu_tests, visible, test_sources, text)
        cells.append(_code(source, _grade(f"test-{index + 1:02d}-{_slug(concept)}", points)))
    return cells


def _test_cell(task, concept, points, gpu_points, count_gpu_tests, functions, test_sources, text) -> str:
    arguments = [json.dumps(task.name), json.dumps(concept, ensure_ascii=False), f"points={points:g}"]
    if gpu_points:
        arguments.append(f"gpu_points={gpu_points:g}")
    if count_gpu_tests:
        arguments.append("count_gpu_tests=True")
    arguments.append(f"visible_tests=[{', '.join(functions)}]")
    call = "cell = ConceptCell(" + ", ".join(arguments) + ")"
    if len(call) > 100:
        call = "cell = ConceptCell(" + (",\n" + " " * 19).join(arguments) + ")"
    parts = [text["test_cell"].format(concept=concept, points=points) + "\n"
             "import pytest\nfrom grader.delivery.nbgrader_cells import ConceptCell",
             *[test_sources[name] for name in functions],
             f"{call}\n{BEGIN_HIDDEN}\ncell.grade_with_hidden_suite()\n{END_HIDDEN}\ncell.result()"]
    return "\n\n\n".join(parts)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "concept"


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _markdown(text: str) -> dict:
    return {"cell_type": "markdown", "id": None, "metadata": {}, "source": _lines(text)}


def _code(source: str, nbgrader: dict | None, read_only: bool = False, cell_id: str | None = None) -> dict:
    metadata: dict[str, object] = {"nbgrader": nbgrader} if nbgrader else {}
    if read_only:
        metadata.update(editable=False, deletable=False)
    return {"cell_type": "code", "id": cell_id or (nbgrader or {}).get("grade_id"), "metadata": metadata,
            "execution_count": None, "outputs": [], "source": _lines(source)}


def _nbgrader(grade_id: str, *, grade: bool, solution: bool, locked: bool, points: float | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": NBGRADER_SCHEMA_VERSION,
            "solution": solution}
    if points is not None:
        meta["points"] = points
    return meta


def _locked(grade_id: str) -> dict:
    return _nbgrader(grade_id, grade=False, solution=False, locked=True)


def _answer(grade_id: str) -> dict:
    return _nbgrader(grade_id, grade=False, solution=True, locked=False)


def _grade(grade_id: str, points: float) -> dict:
    return _nbgrader(grade_id, grade=True, solution=False, locked=True, points=points)


def submission_notebook(released: dict, task: Task, module: str) -> dict:
    """The released notebook as a learner who wrote `module` hands it in: its answer cells hold
    `module`, split as the source notebook splits the reference (for benchmarks, tests, and
    bringing a module written elsewhere into nbgrader's gradebook)."""
    cells = module_cells(_read(task.exercise_dir / f"{task.module}.py"), module)
    answers = {f"{MODULE_CELL_PREFIX}{f.name}": _without_markers(f.source) for f in cells.functions}
    answers[f"{MODULE_CELL_PREFIX}helpers"] = cells.helpers
    notebook = json.loads(json.dumps(released))
    for cell in notebook["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell["source"] = _lines(answers[grade_id])
    return notebook


def _without_markers(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if line.strip() not in (BEGIN_SOLUTION, END_SOLUTION))


# ---------------------------------------------------------------- the course directory

def config_block() -> str:
    return "\n".join([
        CONFIG_BEGIN,
        "# Written by `grader nbgrader` and rewritten by each run: edit outside these markers.",
        "# The solution region is followed by the stub's own raise: the released stub needs no more.",
        'c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE"}',
        "# A test cell a learner deleted is put back and run, not scored as missing.",
        "c.OverwriteCells.add_missing_cells = True",
        "# A notebook's first test cell grades its whole module (visible and hidden suites).",
        f"c.Execute.timeout = {RUN_LIMIT_S + 60}",
        "# In autograde, only the test cells run in the kernel: learner code runs in the grader's worker.",
        "# The kernel imports nothing from the submission's folder, where nbgrader copies a learner's files.",
        "from grader.delivery.nbgrader_execute import autograde_preprocessors  # noqa: E402",
        "c.Autograde.autograde_preprocessors = autograde_preprocessors()",
        'c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:", "--InteractiveShellApp.ignore_cwd=True",',
        '                             "--InteractiveShellApp.extensions=grader.delivery.nbgrader_kernel"]',
        CONFIG_END])


def update_config(course_dir: Path) -> Path:
    """Write our block into nbgrader_config.py, keeping everything else the instructor wrote."""
    path = course_dir / "nbgrader_config.py"
    block = config_block()
    if not path.exists():
        path.write_text(f'c = get_config()  # noqa: F821\nc.CourseDirectory.course_id = "{COURSE_ID}"\n\n{block}\n',
                        encoding="utf-8")
        return path
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(CONFIG_BEGIN) + r".*?" + re.escape(CONFIG_END), re.DOTALL)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip("\n") + f"\n\n{block}"
    path.write_text(text.rstrip("\n") + "\n", encoding="utf-8")
    return path


def deliver(args, tasks: list[Task]) -> str:
    """`grader nbgrader`."""
    notebooks = write_course(args.course_dir, tasks, args.lang, count_gpu_tests=args.gpu)
    return "\n".join([f"wrote {args.course_dir / 'nbgrader_config.py'} and {len(notebooks)} notebook(s):",
                      *(f"  {path}" for path in notebooks),
                      f"next, in {args.course_dir}: nbgrader generate_assignment <task> for each, then release them "
                      "(docs/instructor/nbgrader.md)"])


def write_course(course_dir: Path, tasks: list[Task], lang: str = "en", count_gpu_tests: bool = False) -> list[Path]:
    """Write (or update) the course directory; returns the notebooks written."""
    if lang not in LANGUAGES:
        raise BuildError(f"no language {lang!r}; choose one of {', '.join(LANGUAGES)}")
    course_dir = Path(course_dir)
    suites = collect_suites(tasks)
    notebooks = [(task, build_notebook(task, suites[task.name], lang, count_gpu_tests)) for task in tasks]
    course_dir.mkdir(parents=True, exist_ok=True)
    update_config(course_dir)
    written = []
    for task, notebook in notebooks:
        path = course_dir / "source" / task.name / f"{task.name}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written
