"""`grader gradescope`: the autograder zip in a simulated Gradescope harness.

The zip is unpacked into a temporary tree shaped like Gradescope's (`source/`, `submission/`,
`results/`, `run_autograder` at the root; AUTOGRADER_ROOT points the scripts at it),
`setup.sh` runs in dry-run mode (it installs nothing), and `run_autograder` grades with this
interpreter (GRADER_PYTHON). Each `results.json` is validated against a JSON schema written
from Gradescope's specification. Task 01 only, to keep the gradings short."""
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest

from grader.course import COURSE
from grader.delivery.gradescope import AutograderError, build_autograder
from grader.schema.report import NO_GPU

SCHEMA = json.loads((Path(__file__).parent / "schemas" / "gradescope_results.schema.json").read_text())
ATTENTION = COURSE.task_named("01")


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    return build_autograder(tmp_path_factory.mktemp("zip") / "autograder.zip", [ATTENTION])


def harness(zip_path: Path, root: Path, submission: dict[str, str]) -> Path:
    """An /autograder-shaped tree: the zip in source/, run_autograder beside it (where
    Gradescope copies it), the learner's files in submission/."""
    (root / "source").mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(root / "source")
        for info in archive.infolist():          # zipfile drops the permission bits: restore them
            os.chmod(root / "source" / info.filename, (info.external_attr >> 16) & 0o777)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    for name, text in submission.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_text(text)
    return root


def run_autograder(root: Path) -> tuple[subprocess.CompletedProcess, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRADER_", "PYTHONPATH"))}
    done = subprocess.run([str(root / "run_autograder")], cwd=root, capture_output=True, text=True, timeout=900,
                          env={**env, "AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": sys.executable})
    results = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(results, SCHEMA)
    return done, results


REFERENCE = (COURSE.solutions / ATTENTION.name / "attention.py").read_text()


def per_test(results: dict) -> tuple[list[dict], list[dict]]:
    """Gradescope's entries: the totals shown as the hidden tests are, and the tests."""
    totals = [t for t in results["tests"] if t["extra_data"].get("totals")]
    return totals, [t for t in results["tests"] if not t["extra_data"].get("totals")]


def test_the_zip_holds_the_scripts_at_its_root_and_no_reference(autograder):
    with zipfile.ZipFile(autograder.path) as archive:
        names = archive.namelist()
        modes = {info.filename: (info.external_attr >> 16) & 0o777 for info in archive.infolist()}
    assert {"setup.sh", "run_autograder"} <= set(names) and modes["setup.sh"] == modes["run_autograder"] == 0o755
    assert any(n.startswith(f"tests/hidden/{ATTENTION.name}/test_") for n in names)
    assert any(n.startswith("datasets/") for n in names) and "grader/cli.py" in names
    assert not [n for n in names if n.startswith(("solutions/", "grader/delivery/"))]
    assert not [n for n in names if n.startswith("tests/") and n.endswith("/variants.py")]
    assert not [n for n in names if "/independent/" in n]       # a whole correct solution
    assert not [n for n in names if n.startswith("tests/hidden/") and ATTENTION.name not in n]


def test_the_zip_is_the_same_bytes_when_rebuilt(autograder, tmp_path):
    again = build_autograder(tmp_path / "again.zip", [ATTENTION])
    assert again.path.read_bytes() == autograder.path.read_bytes()


def test_setup_dry_run_says_how_it_would_install_and_installs_nothing(autograder, tmp_path):
    root = harness(autograder.path, tmp_path / "autograder", {})
    done = subprocess.run(["bash", str(root / "source" / "setup.sh"), "--dry-run"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "AUTOGRADER_ROOT": str(root)})
    assert done.returncode == 0, done.stderr
    commands = [line for line in done.stdout.splitlines() if line.startswith("+ ")]
    torch = next(pin for pin in (COURSE.root / "constraints.txt").read_text().splitlines() if pin.startswith("torch=="))
    assert f"+ python3 -m venv {root}/venv" in commands
    assert any(torch in c and "download.pytorch.org/whl/cpu" in c for c in commands)
    assert commands[-1].endswith(f"-c {root}/source/constraints.txt --no-build-isolation -e {root}/source")
    assert not (root / "venv").exists()
    (root / "source" / "wheels").mkdir()
    offline = subprocess.run(["bash", str(root / "source" / "setup.sh"), "--dry-run"], capture_output=True, text=True,
                             timeout=120, env={**os.environ, "AUTOGRADER_ROOT": str(root)})
    pip_lines = [line for line in offline.stdout.splitlines() if "/pip install" in line]
    assert pip_lines and all(f"--no-index --find-links {root}/source/wheels" in line for line in pip_lines)


def test_run_autograder_grades_the_reference_to_full_marks(autograder, tmp_path):
    root = harness(autograder.path, tmp_path / "autograder", {"attention.py": REFERENCE})     # a flat upload
    done, results = run_autograder(root)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((root / "results" / "score_report.json").read_text())
    assert report["complete"] and report["total"]["percent"] == 100.0
    assert results["score"] == report["total"]["points"] == report["total"]["max_points"] > 40
    (totals,), tests = per_test(results)
    graded = [t for t in tests if t["extra_data"]["graded"]]
    assert all(t["status"] == "passed" and t["score"] == t["max_score"] > 0 for t in graded)
    assert {t["visibility"] for t in tests if t["extra_data"]["suite"] == "hidden"} == {"after_published"}
    assert {t["visibility"] for t in tests if t["extra_data"]["suite"] == "visible"} == {"visible"}
    assert all(t["tags"] and t["tags"][0] for t in graded)                 # every test names its concept
    gpu = [t for t in tests if not t["extra_data"]["graded"]]
    assert gpu and all("status" not in t and t["max_score"] == 0 and NO_GPU.feedback in t["tags"] for t in gpu)
    # shown at once: the visible suite's total; with the hidden suite, as the hidden tests are
    visible_points = sum(t["max_score"] for t in graded if t["extra_data"]["suite"] == "visible")
    assert f"**Visible tests: {visible_points:g} / {visible_points:g} points (100.0%)**" in results["output"]
    assert totals["visibility"] == "after_published" and "not graded here" in totals["output"]
    assert f"**{results['score']:g} / {results['score']:g} points (100.0%)**" in totals["output"]
    # the course copy inside the zip graded it
    assert all(arg.startswith(str(root / "source")) for arg in report["run"]["config"]["args"][:2])
    assert (root / "results" / "report.html").exists()


def test_run_autograder_grades_a_fork_clone_of_the_stub_to_zero(autograder, tmp_path):
    stub = (ATTENTION.exercise_dir / "attention.py").read_text()
    root = harness(autograder.path, tmp_path / "autograder", {f"exercises/{ATTENTION.name}/attention.py": stub,
                                                               "README.md": "my fork"})
    done, results = run_autograder(root)
    assert done.returncode == 0 and results["score"] == 0
    failed = [t for t in per_test(results)[1] if t.get("status") == "failed"]
    assert failed and all("not implemented yet" in t["output"] for t in failed)
    assert all("Your line" in t["output"] for t in failed)


def test_run_autograder_explains_a_submission_without_the_module(autograder, tmp_path):
    root = harness(autograder.path, tmp_path / "autograder", {"notes.txt": "I forgot the code"})
    done, results = run_autograder(root)
    assert done.returncode == 0 and results["score"] == 0
    tests = per_test(results)[1]
    assert tests and all("attention.py was not found" in t["output"] for t in tests if t["extra_data"]["graded"])


def test_the_builder_refuses_what_it_cannot_build(tmp_path):
    (tmp_path / "wheels").mkdir()
    with pytest.raises(AutograderError, match="no wheel"):
        build_autograder(tmp_path / "a.zip", [ATTENTION], wheels=tmp_path / "wheels")
    with pytest.raises(AutograderError, match="visibility"):
        build_autograder(tmp_path / "a.zip", [ATTENTION], hidden_visibility="soon")
