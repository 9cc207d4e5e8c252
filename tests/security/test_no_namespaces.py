"""The official channels where no namespace can be made, as in a platform's container (a real
seccomp filter, `no_namespaces.py`): the Gradescope zip's `run_autograder` and the PrairieLearn
entrypoint grade at the uid level, and a learner's module that rewrites the running entrypoint,
patches the grader or reads the hidden suite changes nothing and scores the stub's 0. Where not
even the uid level can be had, they say the submission could not be graded safely."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from grader.course import COURSE
from grader.delivery.gradescope import build_autograder
from grader.worker.loading import sibling_module

harness = sibling_module(__file__, "harness")

ATTENTION = COURSE.task_named("01")
STUB = (ATTENTION.exercise_dir / "attention.py").read_text(encoding="utf-8")
REFERENCE = (COURSE.solutions / ATTENTION.name / "attention.py").read_text(encoding="utf-8")
FORGED = '{"score": 1000, "output": "forged", "tests": []}'

pytestmark = [pytest.mark.skipif(harness.level_skip_reason("uid") is not None,
                                 reason=str(harness.level_skip_reason("uid"))),
              pytest.mark.timeout(1200)]


def attempts(*actions: tuple[str, str]) -> str:
    """Module code that tries each (description, statement) at import and prints how it went."""
    lines = ["import os, pathlib"]
    for what, statement in actions:
        lines += ["try:", f"    {statement}", f"    print('SUCCEEDED', {what!r})",
                  "except Exception as exc:", f"    print('REFUSED', {what!r}, type(exc).__name__)"]
    return "\n".join(lines) + "\n\n" + STUB


def rewrites_the_entrypoint(root: Path) -> str:
    line = f"echo '{FORGED}' > {root}/results/results.json"
    return attempts(("append to run_autograder", f"open({str(root / 'run_autograder')!r}, 'a').write({line!r} + '\\n')"),
                    ("replace run_autograder", f"pathlib.Path({str(root / 'run_autograder')!r}).write_text('exit 0')"),
                    ("forge results.json", f"pathlib.Path({str(root / 'results' / 'results.json')!r}).write_text({FORGED!r})"))


def patches_the_grader(course: Path) -> str:
    patch = "\\nimport builtins\\n"
    targets = [course / "grader" / "reports" / name for name in ("gradescope.py", "prairielearn.py", "report.py")]
    return attempts(*[(f"patch {target.name}", f"open({str(target)!r}, 'a').write({patch!r})") for target in targets],
                    ("plant a module beside the grader",
                     f"pathlib.Path({str(course / 'grader' / 'sitecustomize.py')!r}).write_text('')"))


def reads_what_decides_the_grade(course: Path) -> str:
    hidden = course / "tests" / "hidden" / ATTENTION.name / "test_attention_hidden.py"
    return attempts(("read the hidden suite", f"print(open({str(hidden)!r}).read()[:200])"),
                    ("read the course secret", f"print(open({str(course / '.grader-secret')!r}).read())"),
                    ("list the hidden suite", f"print(os.listdir({str(hidden.parent)!r}))"))


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    return build_autograder(tmp_path_factory.mktemp("zip") / "autograder.zip", [ATTENTION]).path


@pytest.fixture
def box():
    """A folder every user may enter, as /autograder is (pytest's own are its owner's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="grader-test-box-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def gradescope_tree(zip_path: Path, root: Path, module: str) -> Path:
    (root / "source").mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(root / "source")
    os.chmod(root / "source" / "run_autograder", 0o755)
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    (root / "submission" / "attention.py").write_text(module, encoding="utf-8")
    return root


def run_autograder(root: Path, env_extra: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRADER_", "PYTHONPATH"))}
    env.update(AUTOGRADER_ROOT=str(root), GRADER_PYTHON=sys.executable, **(env_extra or {}))
    done = subprocess.run([*harness.launcher("uid"), str(root / "run_autograder")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=900)
    return done, json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def digests(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and "results" not in p.relative_to(root).parts and "__pycache__" not in p.parts}


def report_of(root: Path) -> dict:
    return json.loads((root / "results" / "score_report.json").read_text(encoding="utf-8"))


def test_gradescope_grades_the_reference_at_the_uid_level(autograder, box):
    root = gradescope_tree(autograder, box / "ag", REFERENCE)
    done, results = run_autograder(root)
    report = report_of(root)
    assert report["isolation"]["level"] == "uid", report["isolation"]
    assert results["score"] == report["total"]["max_points"] > 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.parametrize("attack", [pytest.param(attack, marks=[] if attack == "patches_the_grader" else [pytest.mark.full])
                                    for attack in ("stub", "rewrites_the_entrypoint", "patches_the_grader", "reads")])
def test_gradescope_attacks_score_the_stubs_zero_and_change_nothing(autograder, box, attack):
    root = box / "ag"
    module = {"stub": lambda: STUB, "rewrites_the_entrypoint": lambda: rewrites_the_entrypoint(root),
              "patches_the_grader": lambda: patches_the_grader(root / "source"),
              "reads": lambda: reads_what_decides_the_grade(root / "source")}[attack]()
    gradescope_tree(autograder, root, module)
    before = digests(root)
    done, results = run_autograder(root)
    assert results["score"] == 0 and "forged" not in json.dumps(results), results.get("output")
    assert report_of(root)["isolation"]["level"] == "uid"
    assert digests(root) == before, "the tree changed while it graded"
    log = (root / "results" / "score_report.json").read_text(encoding="utf-8") + done.stdout + done.stderr
    assert "SUCCEEDED" not in log, [line for line in log.splitlines() if "SUCCEEDED" in line][:5]
    if attack == "reads":
        assert "def test_" not in log


# The command docs/instructor/prairielearn.md opens with, and the same with the flag forgotten.
PRAIRIELEARN_FORMS = {"documented": ["--isolation", "required"], "bare": []}


@pytest.mark.parametrize("form", PRAIRIELEARN_FORMS)
def test_prairielearn_path_grades_at_the_uid_level_and_resists_a_patch(tmp_path, box, form):
    student = box / "student"
    student.mkdir()
    (student / "attention.py").write_text(patches_the_grader(COURSE.root), encoding="utf-8")
    before = digests(COURSE.root / "grader")
    results, gradescope = box / "results.json", box / "gradescope.json"
    done = harness.run_cli(["grade", student, "--tasks", "01", *PRAIRIELEARN_FORMS[form], "--prairielearn", results,
                            "--gradescope", gradescope, "--json", box / "report.json"], harness.grading_env(tmp_path),
                           cwd=box, timeout_s=900, level="uid")
    graded = json.loads(results.read_text(encoding="utf-8"))
    assert json.loads((box / "report.json").read_text())["isolation"]["level"] == "uid", done.output[-2000:]
    assert graded["score"] == 0 and graded["gradable"] is True, graded
    assert graded["message"].endswith("isolation of your code during grading: uid"), graded["message"]
    assert json.loads(gradescope.read_text(encoding="utf-8"))["score"] == 0
    assert digests(COURSE.root / "grader") == before


def test_without_even_the_uid_level_the_channels_refuse_to_grade(autograder, box, tmp_path):
    """A container whose grader cannot make a seccomp filter: nothing of the learner's runs, and
    the platforms' results say why."""
    broken = tmp_path / "no-seccomp"
    broken.mkdir()
    (broken / "pyseccomp.py").write_text("raise ImportError('libseccomp is not installed')\n")
    root = gradescope_tree(autograder, box / "ag", REFERENCE.replace("import numpy as np", "import numpy as np\nprint('RAN')"))
    done, results = run_autograder(root, {"PYTHONPATH": str(broken)})
    assert results["score"] == 0 and "could not be graded safely" in results["output"], results["output"]
    assert "RAN" not in done.stdout + done.stderr
    before = digests(COURSE.root / "grader")
    for form, flags in PRAIRIELEARN_FORMS.items():
        pl = box / f"pl-{form}.json"
        done = harness.run_cli(["grade", root / "submission", "--tasks", "01", *flags, "--prairielearn", pl],
                               harness.grading_env(tmp_path, PYTHONPATH=str(broken)), cwd=box, timeout_s=300, level="uid")
        graded = json.loads(pl.read_text(encoding="utf-8"))
        assert graded["gradable"] is False and "could not be graded safely" in json.dumps(graded), (form, graded)
        assert "RAN" not in done.output, form
    gradescope = box / "gs.json"           # the bare --gradescope form, outside the zip's run_autograder
    done = harness.run_cli(["grade", root / "submission", "--tasks", "01", "--gradescope", gradescope],
                           harness.grading_env(tmp_path, PYTHONPATH=str(broken)), cwd=box, timeout_s=300, level="uid")
    graded = json.loads(gradescope.read_text(encoding="utf-8"))
    assert graded["score"] == 0 and "could not be graded safely" in graded["output"], graded
    assert "RAN" not in done.output
    assert digests(COURSE.root / "grader") == before
