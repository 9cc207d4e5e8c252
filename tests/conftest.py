"""The project's own tests. Student-facing suites live in exercises/ and tests/hidden/ and are
run through the grader, never collected from here."""
import os
import tempfile

import pytest

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
