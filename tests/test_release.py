"""`grader release`: the student repository works on a fresh install, runs its fork CI, carries a
Classroom workflow in Classroom's shape, holds no byte of a hidden suite or a reference, and reads
on its own: no text a learner can read names a file the release does not hold.

The fresh install downloads nothing: a new virtual environment sees this interpreter's
site-packages through a .pth file (the pinned libraries), and the release is installed into it
with `pip install --no-deps --no-build-isolation --no-index -e`."""
import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from grader.course import COURSE
from grader.delivery.release import FACT_SOURCES, LEARNER_RUNTIME, ReleaseError, build_release

TASKS = list(COURSE.tasks())
CLASSROOM_RUNNERS = re.compile(r"^([a-zA-Z0-9]+,)*[a-zA-Z0-9]+$")   # what the Classroom reporter accepts


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return build_release(tmp_path_factory.mktemp("release") / "l1-exercises", TASKS, classroom=True)


@pytest.fixture(scope="module")
def learner_env(release, tmp_path_factory):
    """A fresh virtual environment with the release installed (editable), as a learner has it."""
    venv = tmp_path_factory.mktemp("learner") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site_packages = next(venv.glob("lib/python*/site-packages"))
    inherited = [p for p in sys.path if p.endswith("site-packages")]
    (site_packages / "_pinned_set.pth").write_text("\n".join(inherited) + "\n")
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                              "--quiet", "--no-deps", "--no-build-isolation", "--no-index", "-e", str(release.root)],
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, f"the release did not install (is the test extra installed?):\n{install.stderr}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRADER_", "PYTHON", "GITHUB_", "VIRTUAL_ENV"))}
    # The borrowed packages are the checkout's: the learner's pytest must not write its rewritten
    # plugins beside them while an attack on the other worker checks the course tree is unchanged.
    return {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}", "VIRTUAL_ENV": str(venv),
            "PYTHONDONTWRITEBYTECODE": os.environ["PYTHONDONTWRITEBYTECODE"]}   # conftest's


def learner(command: str, env: dict, cwd: Path, **extra_env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env={**env, **extra_env}, capture_output=True, text=True,
                          timeout=900)


# ---------------------------------------------------------------- the learner's loop

def test_the_release_is_what_a_fresh_install_imports(release, learner_env):
    done = learner("python -c 'import grader.cli, grader.session.plugin; print(grader.cli.__file__)'",
                   learner_env, release.root)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_relative_to(release.root)


def test_pytest_on_a_stub_fails_on_the_learners_line_with_a_readme_pointer(release, learner_env):
    done = learner("python -m pytest exercises/01_einsum_attention", learner_env, release.root)
    out = done.stdout + done.stderr
    visible = sum(1 for path in (release.root / "exercises" / TASKS[0].name).glob("test_*.py")
                  for node in ast.parse(path.read_text()).body
                  if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"))
    assert done.returncode == 1 and f"{visible} failed" in out, out[-3000:]
    assert 'softmax() is not implemented yet: see README.md, section "Stable softmax"' in out
    assert "Your line 19, in softmax: raise NotImplementedError(" in out            # the learner's line
    assert "grader/session/submission.py" not in out and "def test_" not in out        # not the grader's, nor the test's
    full = learner("python -m pytest exercises/01_einsum_attention -x --full-trace", learner_env, release.root)
    assert "grader/session/submission.py" in full.stdout, "--full-trace keeps every frame"


@pytest.fixture(scope="module")
def fork_check(release, learner_env, tmp_path_factory):
    """The fork workflow's grading step, run as Actions runs it: its command from check.yml, the
    GitHub environment files pointing at temporary files."""
    workflow = yaml.safe_load((release.root / ".github" / "workflows" / "check.yml").read_text())
    (step,) = [s for s in workflow["jobs"]["check"]["steps"] if "grader check" in s.get("run", "")]
    files = tmp_path_factory.mktemp("github")
    done = learner(step["run"], learner_env, release.root, FAIL_UNDER="100", GITHUB_ACTIONS="true",
                   GITHUB_WORKSPACE=str(release.root), GITHUB_STEP_SUMMARY=str(files / "summary.md"),
                   GITHUB_OUTPUT=str(files / "output"))
    return {"workflow": workflow, "step": step, "done": done, "summary": (files / "summary.md").read_text(),
            "output": (files / "output").read_text(),
            "junit": ET.parse(release.root / "grader-reports" / "junit.xml").getroot()}


def test_fork_workflow_writes_summary_annotations_and_junit(release, fork_check):
    done, junit = fork_check["done"], fork_check["junit"]
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]      # stubs: below 100%
    cases = list(junit.iter("testcase"))
    assert len(cases) > 20 and all(case.find("failure") is not None for case in cases)   # a stub fails everything
    suites = {s.get("name") for s in junit.findall("testsuite")}
    assert suites == {t.name for t in TASKS}
    visible_points = sum(float(next(p.get("value") for p in s.find("properties") if p.get("name") == "max_points"))
                         for s in junit.findall("testsuite"))
    assert fork_check["output"] == f"points=0\nmax-points={visible_points:g}\npercent=0.00\n"
    summary = fork_check["summary"]
    assert summary.startswith(f"## Score: 0 / {visible_points:g} points (0.0%)")
    assert all(f"| {t.name} | 0 / " in summary for t in TASKS)
    errors = [line for line in done.stdout.splitlines() if line.startswith("::error ")]
    assert len(errors) == 10 and errors[-1].startswith(f"::error title={len(cases) - 9} more test(s) to fix::")
    for line in errors[:-1]:
        place = dict(re.findall(r"(file|line)=([^,:]+)", line.split("::")[1]))
        source = (release.root / place["file"]).read_text().splitlines()
        assert "raise NotImplementedError" in source[int(place["line"]) - 1], line   # the stub's own line
    assert (release.root / "grader-reports" / "report.html").exists()
    upload = next(s for s in fork_check["workflow"]["jobs"]["check"]["steps"] if "upload-artifact" in s.get("uses", ""))
    assert upload["if"] == "always()" and upload["with"]["path"].rstrip("/") == "grader-reports"


@pytest.mark.full       # the fork's check runs in the default tier (test_fork_workflow_writes_summary_annotations_and_junit)
def test_fork_check_exit_status_follows_fail_under(release, learner_env):
    assert learner("grader check 01 --fail-under 0", learner_env, release.root).returncode == 0
    assert learner("grader check 01 --fail-under 1", learner_env, release.root).returncode == 1


@pytest.mark.full       # the release installed is exercised in the default tier by the fresh-install import and the stub's pytest
def test_the_release_passes_its_own_checks_with_the_reference(release, learner_env, tmp_path):
    reference = shutil.copytree(COURSE.solutions, tmp_path / "my_solutions")      # graded from outside the release
    done = learner(f"grader check --impl {reference} --json {tmp_path / 'report.json'}", learner_env, release.root)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["total"]["percent"] == 100.0 and report["complete"]
    assert {t["task"] for t in report["tasks"]} == {t.name for t in TASKS}


# ---------------------------------------------------------------- Classroom

def test_classroom_workflow_has_classrooms_shape_and_the_visible_points(release, fork_check):
    workflow = yaml.safe_load((release.root / ".github" / "workflows" / "classroom.yml").read_text())
    assert workflow["on"] == ["push", "repository_dispatch"]
    assert workflow["permissions"] == {"checks": "write", "actions": "read", "contents": "read"}
    job = workflow["jobs"]["run-autograding-tests"]
    assert job["if"] == "github.actor != 'github-classroom[bot]'" and job["runs-on"] == "ubuntu-latest"
    graders = [s for s in job["steps"] if s.get("uses") == "classroom-resources/autograding-command-grader@v1"]
    reporter = job["steps"][-1]
    assert reporter["uses"] == "classroom-resources/autograding-grading-reporter@v1"
    visible = {s.get("name"): float(next(p.get("value") for p in s.find("properties") if p.get("name") == "max_points"))
               for s in fork_check["junit"].findall("testsuite")}
    assert [g["with"]["command"] for g in graders] == [f"grader check {t.name[:2]}" for t in TASKS]
    assert [g["with"]["max-score"] for g in graders] == [round(visible[t.name]) for t in TASKS]
    assert all(g["with"]["test-name"] == g["name"] and g["with"]["timeout"] == 10 for g in graders)
    ids = [g["id"] for g in graders]
    assert reporter["with"]["runners"] == ",".join(ids) and CLASSROOM_RUNNERS.match(reporter["with"]["runners"])
    assert reporter["env"] == {f"{i.upper()}_RESULTS": f"${{{{steps.{i}.outputs.result}}}}" for i in ids}
    readme = (release.root / "README.md").read_text()
    assert "## GitHub Classroom" in readme and "practice feedback" in readme


# ---------------------------------------------------------------- what is in it, and what is not

def distinctive_lines(path: Path) -> set[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return set()
    return {line.strip() for line in text.splitlines() if len(line.strip()) >= 16}


def function_bodies(path: Path) -> list[str]:
    """Each top-level function's body without its docstring, whitespace collapsed."""
    source = path.read_text(encoding="utf-8")
    bodies = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            text = " ".join(ast.get_source_segment(source, stmt) for stmt in body)
            bodies.append(" ".join(text.split()))
    return bodies


def text_files(root: Path):
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.stat().st_size < 2_000_000:
            try:
                yield path, path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue


def secrets():
    """The lines of every hidden-suite file and the bodies of every reference function that the
    course does not also publish (shared imports, markers and helpers are public by definition)."""
    public_lines, public_text = set(), []
    for folder in (COURSE.exercises, COURSE.root / "grader", COURSE.datasets):
        for path, text in text_files(folder):
            public_lines |= distinctive_lines(path)
            public_text.append(" ".join(text.split()))
    public = " ".join(public_text)
    course_only = [*COURSE.hidden.rglob("*"), *COURSE.solutions.rglob("*")]
    secret_files = [p for p in course_only if p.is_file() and "__pycache__" not in p.parts]
    lines = {line for path in secret_files for line in distinctive_lines(path)} - public_lines
    bodies = {body for path in COURSE.solutions.rglob("*.py") for body in function_bodies(path)
              if len(body) >= 24 and body not in public}
    digests = {hashlib.sha256(p.read_bytes()).hexdigest() for p in secret_files}
    return lines, bodies, digests


def leaks(root: Path, found_secrets) -> list[str]:
    lines, bodies, digests = found_secrets
    problems = []
    texts = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if hashlib.sha256(path.read_bytes()).hexdigest() in digests:
            problems.append(f"{path}: a copy of a hidden or reference file")
    for path, text in text_files(root):
        problems += [f"{path}: hidden line {line!r}" for line in distinctive_lines(path) & lines]
        texts.append(" ".join(text.split()))
    everything = " ".join(texts)
    problems += [f"reference body {body[:60]!r}..." for body in bodies if body in everything]
    return problems


@pytest.fixture(scope="module")
def course_secrets():
    found = secrets()
    assert len(found[0]) > 1000 and len(found[1]) > 30, "the secrets to search for were not found"
    return found


def test_no_byte_of_a_hidden_suite_or_a_reference_is_in_the_release(release, course_secrets):
    assert leaks(release.root, course_secrets) == []
    # bytecode a test's run of the release wrote beside what it ships is not shipped: left out here
    relative = [path.relative_to(release.root) for path in release.root.rglob("*") if "__pycache__" not in path.parts]
    instructor_only = [r for r in relative if r.parts[0] in ("solutions", "tests")
                       or (len(r.parts) > 2 and r.parts[:2] == ("grader", "delivery")
                           and r.name not in LEARNER_RUNTIME)]
    assert not instructor_only
    public_names = {p.name for folder in (COURSE.exercises, COURSE.root / "grader", COURSE.datasets) for p in folder.rglob("*")}
    hidden_names = {p.name for p in COURSE.hidden.rglob("*") if p.is_file()} - public_names
    assert hidden_names and not hidden_names & {r.name for r in relative}


def test_the_leak_search_finds_a_planted_leak(tmp_path, course_secrets):
    hidden_line = next(line for line in sorted(course_secrets[0]) if line.startswith("assert "))
    body = sorted(course_secrets[1])[0]
    (tmp_path / "notes.md").write_text(f"Some notes.\n    {hidden_line}\nMore notes.\n")
    (tmp_path / "helper.py").write_text(f"def f():\n    # copied\n    {body}\n")
    (tmp_path / "copy.py").write_bytes(next(COURSE.solutions.rglob("*.py")).read_bytes())
    found = leaks(tmp_path, course_secrets)
    assert any("hidden line" in f for f in found) and any("reference body" in f for f in found)
    assert any("a copy of a hidden or reference file" in f for f in found)


# A reference in a text or a message: a path with a folder, or a file name, with an extension a file of the course has.
FILE_REFERENCE = re.compile(r"(?<![\w./-])((?:[\w.-]+/)+[\w.-]+\.(?:py|md|json|jsonl|csv|txt|toml|yml|yaml|ipynb)"
                            r"|[\w-]+\.(?:py|md))\b")
NOT_THE_RELEASES = {        # names of files a release need not hold, and why
    "modeling_llama.py": "transformers' own source, installed with it, which exercise 04 asks the learner to read",
    "pytest_timeout.py": "the plugin's file name, compared with a frame's by the grader, not a reference",
}
PLACEHOLDERS = ("out_dir/", "O/")   # what the learner's code writes, where the call (or --out O) says


def learner_texts(path: Path) -> list[str]:
    """What a learner reads of a file: a markdown file whole; of Python, its strings that are not
    docstrings (the messages it prints, its help)."""
    if path.suffix == ".md":
        return [path.read_text(encoding="utf-8")]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def missing_references(root: Path) -> dict[str, list[str]]:
    """Each file name or path a learner-facing text of the release names that the release does not
    hold (a path from the release's root or the text's folder; a bare name anywhere below the
    text's folder, or for the grader's messages anywhere), with the files that name it."""
    names = {p.name for p in root.rglob("*") if p.is_file()}
    missing: dict[str, list[str]] = {}
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".md", ".py") and p.is_file()):
        below = {p.name for p in path.parent.rglob("*")}
        for text in learner_texts(path):
            for reference in FILE_REFERENCE.findall(text):
                bare = "/" not in reference
                if (root / reference).exists() or (path.parent / reference).exists() \
                        or (bare and (reference in below or (path.suffix == ".py" and reference in names))) \
                        or reference in NOT_THE_RELEASES or reference.startswith(PLACEHOLDERS):
                    continue
                missing.setdefault(reference, []).append(str(path.relative_to(root)))
    return missing


def test_the_release_names_no_file_it_does_not_hold(release):
    assert missing_references(release.root) == {}


def test_the_reference_check_finds_a_file_the_release_does_not_hold(tmp_path):
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "attention.py").write_text('"""docs/guide.md, in a docstring"""\nMESSAGE = "see docs/guide.md"\n')
    (tmp_path / "exercises" / "README.md").write_text("Write `attention.py`; run `builder.py`; read `../README.md`.\n")
    (tmp_path / "README.md").write_text("`exercises/attention.py` and `out_dir/run.json`\n")
    assert missing_references(tmp_path) == {"docs/guide.md": ["exercises/attention.py"],
                                            "builder.py": ["exercises/README.md"]}


def test_released_data_is_what_the_exercises_name_and_checks_out(release):
    shipped = {p.name for p in (release.root / "datasets").iterdir()}
    assert {"corpus", "configs", "profiles", "sft", "tiny_llama", "eval_results", "MANIFEST.json", "README.md"} <= shipped
    assert not shipped & {"build.py", "eval_results_builder.py", "__init__.py"}    # the builder stays with the course
    manifest = json.loads((release.root / "datasets" / "MANIFEST.json").read_text())
    course = json.loads((COURSE.datasets / "MANIFEST.json").read_text())
    assert manifest["data_version"] == course["data_version"]
    assert set(manifest["facts"]) == {"corpus", "tokenizer", "tiny_llama", "param_counts", "sft", "eval_results"}
    for path, info in manifest["files"].items():
        data = (release.root / "datasets" / path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == info["sha256"], path
    readme = (release.root / "datasets" / "README.md").read_text()
    assert "## corpus/" in readme and "## eval_results/" in readme      # the sections of the shipped entries ...
    assert "## Build and verify" not in readme                                  # ... and none about building them


def test_every_fact_of_the_manifest_has_a_declared_source():
    """A new fact must say which data it describes before it can ship (or be kept back)."""
    course = json.loads((COURSE.datasets / "MANIFEST.json").read_text())
    assert set(course["facts"]) <= set(FACT_SOURCES)


def test_the_release_pyproject_keeps_the_pinned_set_and_drops_the_instructor_extra(release):
    course = tomllib.loads((COURSE.root / "pyproject.toml").read_text())
    learner_project = tomllib.loads((release.root / "pyproject.toml").read_text())
    assert learner_project["project"]["dependencies"] == course["project"]["dependencies"]
    assert learner_project["project"]["entry-points"] == course["project"]["entry-points"]
    assert "optional-dependencies" not in learner_project["project"]
    assert learner_project["tool"]["pytest"]["ini_options"]["testpaths"] == ["exercises"]
    assert (release.root / "constraints.txt").read_bytes() == (COURSE.root / "constraints.txt").read_bytes()


def test_a_chinese_release_makes_the_chinese_readmes_the_ones_stubs_point_to(tmp_path):
    made = build_release(tmp_path / "zh", TASKS[:1], lang="zh-CN")
    exercise = made.root / "exercises" / TASKS[0].name
    assert exercise.joinpath("README.md").read_text() == (TASKS[0].exercise_dir / "README.zh-CN.md").read_text()
    assert exercise.joinpath("README.en.md").read_text() == (TASKS[0].exercise_dir / "README.md").read_text()
    assert not exercise.joinpath("README.zh-CN.md").exists()
    top = made.root.joinpath("README.md").read_text()
    assert top.startswith("# L1 练习") and "[README.en.md](README.en.md)" in top
    assert made.root.joinpath("README.en.md").read_text().startswith("# L1 exercises")
    assert not (made.root / ".github" / "workflows" / "classroom.yml").exists()


def test_a_release_is_never_written_over_something(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "keep.txt").write_text("mine")
    with pytest.raises(ReleaseError, match="not an empty folder"):
        build_release(tmp_path / "old", TASKS[:1])
    done = subprocess.run([sys.executable, "-m", "grader.cli", "release", str(tmp_path / "old")], cwd=COURSE.root,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and (tmp_path / "old" / "keep.txt").read_text() == "mine"
