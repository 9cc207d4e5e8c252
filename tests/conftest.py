"""The project's own tests. Student-facing suites live in exercises/ and tests/hidden/ and are
run through the grader, never collected from here."""
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

SLURM_UP = Path(__file__).resolve().parents[1] / ".ci" / "slurm-up"
# Room to install Slurm's packages (about 25 s) and start its daemons; under a second when up.
SLURM_UP_LIMIT_S = 100

collect_ignore = ["hidden"]

# The modules whose every test runs the grader end to end (a grading, a batch, the audit, a
# platform's harness, a real Slurm or terminal): marked `e2e`, run after the fast tier. A test of
# another module that does the same carries @pytest.mark.e2e itself.
E2E_MODULES = {
    "security/test_attacks.py", "security/test_forged_timing.py", "security/test_format_failures.py",
    "security/test_isolation.py", "security/test_nbgrader_kernel_path.py", "security/test_no_namespaces.py",
    "security/test_output_folders.py", "security/test_planted_links.py", "security/test_replay.py",
    "security/test_resume.py", "security/test_returned_paths.py", "security/test_source_encoding.py",
    "security/test_trusted_memory.py", "security/test_workflow_commands.py",
    "test_audit.py", "test_batch_executors.py", "test_containers.py", "test_distributed_grading.py",
    "test_gradescope.py", "test_grading.py", "test_learning_progress.py", "test_learning_session.py",
    "test_learning_watch.py", "test_nbgrader.py", "test_release.py", "test_shards.py", "test_slurm_cluster.py",
    "test_slurm_grading.py", "test_torchrun_launch.py",
}
# The longest modules (the audit of every suite, the attack batches), which workers sharing a run
# (`-n 2`) start first, one each, so that no worker is left with one of them at the end.
LONGEST_MODULES = ("test_audit.py", "security/test_attacks.py")
TESTS = Path(__file__).resolve().parent



def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="the full tier (CI): also the tests marked full (every attack at every level, the whole audit)")
    parser.addoption("--run-slow", action="store_true", help="also run tests marked slow (minutes each)")


def pytest_configure(config):
    # The runs these tests start (pytest on exercises/, `grader check`) are not a learner's attempts:
    # their progress goes to a scratch file, never into this checkout's own; gone with the session.
    # Nor does hypothesis keep its files in the checkout: the attacks check the course tree is
    # unchanged while a test on the other worker (`-n 2`) may be running.
    scratch = {"GRADER_PROGRESS": "progress.json", "HYPOTHESIS_STORAGE_DIRECTORY": "hypothesis"}
    # For the same reason, neither this process (a module it imports late) nor any it starts writes
    # bytecode into the checkout: the grader's own `__pycache__`, or pytest's rewritten plugins in a
    # virtual environment inside it. A test that starts one with an environment of its own passes the
    # variable on.
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    if any(name not in os.environ for name in scratch):
        folder = tempfile.mkdtemp(prefix="grader-tests-")
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        for name, entry in scratch.items():
            if name not in os.environ:
                os.environ[name] = os.path.join(folder, entry)
                config.add_cleanup(lambda name=name: os.environ.pop(name, None))
    config.addinivalue_line("markers", "slow: takes minutes; runs only with --run-slow")
    config.addinivalue_line("markers", "full: runs in the full tier only (`pytest --full`, CI's): a mechanism the "
                                       "default tier already exercises once, again at another level or on more data")
    config.pluginmanager.register(FastTierClock(config), "fast-tier-clock")
    config.addinivalue_line("markers", "e2e: runs the grader end to end (gradings, batches, the audit, a platform's "
                                       "harness, Slurm, a terminal); `pytest -m 'not e2e'` is the fast tier")


def pytest_collection_modifyitems(config, items):
    """The fast tier first (its time said when it ends), the end-to-end tests after it; on workers
    sharing a run, the longest modules before both; tests marked full are skipped unless --full,
    tests marked slow unless --run-slow."""
    for item in items:
        if _module(item) in E2E_MODULES:
            item.add_marker(pytest.mark.e2e)
    shared = hasattr(config, "workerinput")          # a pytest-xdist worker
    items.sort(key=lambda item: (not (shared and _module(item) in LONGEST_MODULES), _is_e2e(item)))   # stable
    skips = {"full": None if config.getoption("--full") else pytest.mark.skip(reason="full tier: run with --full"),
             "slow": None if config.getoption("--run-slow") else pytest.mark.skip(reason="slow: run with --run-slow")}
    for item in items:
        for marker, skip in skips.items():
            if skip is not None and marker in item.keywords:
                item.add_marker(skip)


def _module(item) -> str:
    """The test's file, relative to tests/ ("" outside it)."""
    path = Path(item.path).resolve()
    return path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else ""


def _is_e2e(item) -> bool:
    return item.get_closest_marker("e2e") is not None


class FastTierClock:
    """Says how long the session took to the end of the fast tier, once its last test is reported
    and end-to-end tests follow (a report is written outside the tests' output capture)."""

    def __init__(self, config):
        self.config, self.started = config, time.monotonic()
        self.last: str | None = None
        self.count = 0

    def pytest_collection_finish(self, session):
        """The tests that will run, `-m` and `-k` applied."""
        fast = [item for item in session.items if not _is_e2e(item)]
        if fast and len(fast) < len(session.items):
            self.last, self.count = fast[-1].nodeid, len(fast)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report):
        if report.when != "teardown" or report.nodeid != self.last:
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("")
            reporter.write_line(f"fast tier (not e2e): {self.count} tests in {time.monotonic() - self.started:.0f} s; "
                                "the end-to-end tests follow", bold=True)


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
