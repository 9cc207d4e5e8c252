"""Progress and hints across real runs: `pytest exercises/NN` in the learner's mode records each
concept's result, and offers a hint on the third failing run without a gain of a concept the
learner is working on, never of one not started (still NotImplementedError); `grader hint` shows
the next unseen one and names the command for the one after, in Chinese when the locale is;
`grader check` never pushes one; `grader progress` shows the table and the concepts still open;
runs that are not the learner's attempts (another tree, a grading) leave the progress alone."""
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader.course import COURSE
from grader.learning import hints, progress
from grader.readme import concepts_of
from grader.schema import report as score

TASK = COURSE.task_named("04")            # its stub fails every visible test in a few seconds
GRADER = str(Path(sys.executable).with_name("grader"))


def ladder(name: str, concept: str) -> list[str]:
    """A concept's hints, read from the file the plain way: the first line of each numbered item."""
    text = (TASK.exercise_dir / name).read_text(encoding="utf-8")
    section = text.split(f"## {concept}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. (.+)$", section, re.M)


@pytest.fixture
def learner_env(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv("GRADER_PROGRESS", str(path))
    monkeypatch.setenv("GRADER_LANG", "en")
    return {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}, path


def run(args, env, **kw):
    return subprocess.run(args, cwd=COURSE.root, env=env, capture_output=True, text=True, timeout=300, **kw)


@pytest.mark.full       # progress is recorded in the default tier by the watcher's terminal test
def test_pytest_in_the_learners_checkout_records_progress_and_hints_only_when_asked_on_the_stub(learner_env):
    env, path = learner_env
    outputs = [run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(TASK.exercise_dir)], env)
               for _ in range(3)]
    assert all(out.returncode == 1 for out in outputs), outputs[0].stdout[-2000:]
    data = json.loads(path.read_text(encoding="utf-8"))["tasks"][TASK.name]
    assert data["runs"] == 3 and data["last_source"] == "pytest"
    concepts = data["concepts"]
    readme_order = [c for c in concepts_of(TASK) if c in concepts]
    first = readme_order[0]                  # nothing worked on yet: the first failing concept in the README's order
    assert all(c["status"] == "failing" and c["attempts"] == 3 and c["first_passed"] is None
               for c in concepts.values())
    assert not any("hint 1 of" in out.stdout for out in outputs), "a hint for work not started (NotImplementedError)"
    assert data["hints_seen"] == {}

    # Asked for: the first hint of the concept the last run left failing, naming the command for the next,
    # which shows the next; then a named one.
    asked = run([GRADER, "hint", TASK.name[:2]], env)
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert "hint 1 of" in asked.stdout and ladder("hints.md", first)[0][:40] in " ".join(asked.stdout.split())
    command = f'grader hint {TASK.name[:2]} "{first}"'
    assert command in " ".join(asked.stdout.split()), asked.stdout
    following = run([GRADER, "hint", TASK.name[:2], first], env)
    assert "hint 2 of" in following.stdout and ladder("hints.md", first)[1][:40] in " ".join(following.stdout.split())
    other = list(concepts)[1]
    chinese = run([GRADER, "hint", TASK.name[:2], other[:6].lower()], {**env, "GRADER_LANG": "", "LANG": "zh_CN.UTF-8"})
    assert chinese.returncode == 0, chinese.stdout + chinese.stderr
    assert "".join(ladder("hints.zh-CN.md", other)[0].split())[:15] in "".join(chinese.stdout.split())

    checked = run([GRADER, "check", TASK.name[:2]], env)
    assert checked.returncode == 1, checked.stdout[-2000:]
    assert "hint 1 of" not in checked.stdout and "hint 2 of" not in checked.stdout, "grader check pushed a hint"
    data = json.loads(path.read_text(encoding="utf-8"))["tasks"][TASK.name]
    assert data["runs"] == 4 and data["last_source"] == "check"

    table = run([GRADER, "progress"], env)
    assert table.returncode == 0
    cells = [c.strip() for c in next(row for row in table.stdout.splitlines() if TASK.name in row).split("│")[1:-1]]
    max_points = sum(c["max_points"] for c in concepts.values())
    assert cells[:6] == [TASK.name, f"0 / {len(concepts)}", f"0 / {max_points:g}", "3", "0", "4"], cells
    assert re.search(r"01_einsum_attention.*not started", table.stdout)
    still_open = " ".join(table.stdout.split()).split(f"{TASK.name}: still open: ", 1)[1]
    assert still_open.startswith(", ".join(readme_order)), still_open

    # Not the learner's attempts: the same tests on another tree, and a grading of it.
    before = path.read_text(encoding="utf-8")
    other_tree = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(TASK.exercise_dir),
                      "--impl", str(COURSE.solutions)], env)
    assert other_tree.returncode == 0, other_tree.stdout[-2000:]
    assert path.read_text(encoding="utf-8") == before


def result(concept, status, points=1.0):
    return score.TestResult(id=f"t::{concept}-{status}-{points}", task=TASK.name, suite="visible", title=concept,
                      status=status, graded=True, max_points=points, concept=concept)


def report_of(*tests):
    return score.ScoreReport(run={}, submission={}, tasks=[score.TaskResult(TASK.name, TASK.title, None, list(tests))])


def stopped(concept, feedback, status="failed"):
    return dataclasses.replace(result(concept, status), feedback=feedback)


def test_a_concept_not_started_is_never_due_a_hint_and_one_worked_on_is(learner_env):
    """Three runs of a function still raising NotImplementedError, or of a module that does not
    import, are no work on the concept; three runs of a wrong answer are."""
    not_started = report_of(stopped("A", 'f() is not implemented yet: see README.md, section "A"'))
    not_imported = report_of(stopped("A", "m.py could not be imported: SyntaxError: invalid syntax", status="error"))
    wrong = report_of(stopped("A", "f(2) returned 5, expected 4"))
    assert [progress.record(r, "test") for r in (not_started, not_imported, not_started, not_imported)] == [{}] * 4
    assert [progress.record(wrong, "test") for _ in range(3)] == [{}, {}, {TASK.name: ["A"]}]
    mixed = report_of(stopped("B", 'f() is not implemented yet: ...'), stopped("B", "f(2) returned 5, expected 4"))
    assert progress.unreached_concepts(mixed.tasks[0].tests) == set(), "one test of B ran the learner's code"
    assert progress.unreached_concepts(not_started.tasks[0].tests) == {"A"}


def test_a_hint_asked_for_without_a_concept_goes_to_the_first_one_worked_on_in_the_readmes_order(learner_env):
    first, second, third = list(hints.ladders(TASK, "en"))[:3]
    progress.record(report_of(stopped(first, "f() is not implemented yet: ..."), stopped(second, "got 3, expected 4"),
                              stopped(third, "got 5, expected 6")), "test")
    assert hints.concept_to_work_on(TASK) == second, "the first concept is not started: the second is worked on"
    progress.record(report_of(stopped(first, "f() is not implemented yet: ..."), result(second, "passed"),
                              result(third, "passed")), "test")
    assert hints.concept_to_work_on(TASK) == first, "nothing worked on fails: the first failing one"


def test_a_gain_restarts_the_count_and_passing_is_remembered_with_its_first_time(learner_env):
    _, path = learner_env
    stuck = report_of(result("A", "failed"), result("A", "failed"))
    gained = report_of(result("A", "passed"), result("A", "failed"))
    dues = [progress.record(r, "test") for r in (stuck, stuck, gained, stuck, stuck)]
    assert dues == [{}, {}, {}, {}, {}], "a gain (1 of 2 points) restarted the count: two failures since"
    assert progress.record(stuck, "test") == {TASK.name: ["A"]}
    passed = report_of(result("A", "passed"), result("A", "passed"))
    progress.record(passed, "test")
    progress.record(stuck, "test")
    entry = progress.load()[TASK.name].concepts["A"]
    assert entry.attempts == 8 and entry.status == progress.FAILING and entry.first_passed is not None
    assert json.loads(path.read_text(encoding="utf-8"))["tasks"][TASK.name]["concepts"]["A"]["best_points"] == 2.0


def test_a_ladder_once_seen_repeats_its_last_hint(learner_env):
    concept = next(iter(hints.ladders(TASK, "en")))
    expected = ladder("hints.md", concept)
    shown = [hints.next_hint(TASK, concept, "en", asked=True) for _ in range(len(expected) + 1)]
    assert [h.text[:len(first_line)] for h, first_line in zip(shown, expected + expected[-1:])] == \
        expected + expected[-1:]
    assert all(len(h.text) >= len(line) for h, line in zip(shown, expected))
    assert [h.repeated for h in shown] == [False] * len(expected) + [True]


def test_the_language_follows_the_option_then_the_locale(monkeypatch):
    for name in ("GRADER_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)
    assert hints.language() == "en"
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert hints.language() == "zh-CN"
    monkeypatch.setenv("LC_ALL", "en_US.UTF-8")          # LC_ALL wins over LANG, as in the C library
    assert hints.language() == "en"
    assert hints.language("zh-CN") == "zh-CN"


def test_a_concept_is_found_by_the_start_of_its_name_and_an_unknown_one_says_the_choices():
    names = list(hints.ladders(TASK, "en"))
    unique = next(n for n in names if sum(m.lower().startswith(n[:6].lower()) for m in names) == 1)
    assert hints.concept_named(TASK, unique[:6].upper()) == unique
    with pytest.raises(KeyError, match=re.escape(names[-1])):
        hints.concept_named(TASK, "no such concept at all")


@pytest.mark.parametrize("gitignore", [COURSE.root / ".gitignore",
                                       COURSE.root / "grader" / "delivery" / "templates" / "gitignore"],
                         ids=["course", "release"])
def test_git_ignores_the_progress_file(tmp_path, gitignore):
    """In the course's checkout and in a learner's repository written by `grader release`."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text(gitignore.read_text(encoding="utf-8"), encoding="utf-8")
    for name in (progress.PROGRESS_FILE, progress.PROGRESS_FILE + ".lock"):
        ignored = subprocess.run(["git", "-C", str(tmp_path), "check-ignore", "-q", name])
        assert ignored.returncode == 0, f"{gitignore.name} does not ignore {name}"
    assert subprocess.run(["git", "-C", str(tmp_path), "check-ignore", "-q", "exercises/01/attention.py"]).returncode == 1


def test_watch_starts_on_the_first_exercise_not_complete(learner_env):
    from grader.learning.watch import default_task
    first, second = COURSE.task_named("01"), COURSE.task_named("02")
    assert default_task(progress.load()) == first
    passed = score.TestResult(id="t::a", task=first.name, suite="visible", title="a", status="passed", graded=True,
                              max_points=1.0, concept="Broadcasting")
    progress.record(score.ScoreReport(run={}, submission={}, tasks=[score.TaskResult(first.name, first.title, None,
                                                                                     [passed])]), "test")
    assert default_task(progress.load()) == second
