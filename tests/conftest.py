"""The project's own tests. Student-facing suites live in exercises/ and tests/hidden/ and are
run through the grader, never collected from here."""
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

SLURM_UP = Path(__file__).resolve().parents[1] / ".ci" / "slurm-up"
# Room to install Slurm's packages (about 25 s) and start its daemons; under a second when up.
SLURM_UP_LIMIT_S = 100

collect_ignore = ["hidden"]

# The runs these tests start (pytest on exercises/, `grader check`) are not a learner's attempts:
# their progress goes to a scratch file, never into this checkout's own.
os.environ.setdefault("GRADER_PROGRESS", os.path.join(tempfile.mkdtemp(prefix="grader-progress-"), "progress.json"))


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", help="also run tests marked slow (minutes each)")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes minutes; runs only with --run-slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def slurm():
    """The one-node Slurm of .ci/slurm-up, started if it is not up; skips with the script's reason
    where it cannot be."""
    try:
        up = subprocess.run([str(SLURM_UP)], capture_output=True, text=True, timeout=SLURM_UP_LIMIT_S)
    except subprocess.TimeoutExpired:
        pytest.skip(f"no Slurm: .ci/slurm-up did not finish in {SLURM_UP_LIMIT_S} s")
    if up.returncode != 0:
        lines = up.stderr.strip().splitlines() or [f"exit status {up.returncode}"]
        pytest.skip(f"no Slurm: {lines[-1]}")
