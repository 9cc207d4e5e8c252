"""At the uid level every worker sees every command line, and its zygote's names the jail copy of
the module it grades. A stub graded beside a correct submission read the neighbour's module that
way and earned its points. The copy (and the submission's `.git`) is readable by its own host's
uid alone: here another worker's uid tries it, with the kernel's own permission checks."""
import os

import pytest

from grader.isolation.sandbox import Limits
from grader.isolation.uid_jail import UidJail, allocate_uid
from grader.worker.loading import sibling_module

harness = sibling_module(__file__, "harness")

pytestmark = pytest.mark.skipif(harness.level_skip_reason("uid") is not None, reason=str(harness.level_skip_reason("uid")))


def test_a_neighbours_module_and_history_cannot_be_opened_by_another_workers_uid(tmp_path):
    jail = UidJail(b"ANSWERS = {'attention': 42}\n", "attention.py", writable_dirs=[tmp_path], limits=Limits(),
                   commit="e816c8a495facc0e7671603e9a3f4c073960bb08")
    try:
        module, head = jail.module_path, jail.module_path.parent / ".git" / "HEAD"
        neighbour = allocate_uid()
        assert harness.tries_as(neighbour, module.read_bytes) == "refused"
        assert harness.tries_as(neighbour, head.read_bytes) == "refused"
        assert harness.tries_as(neighbour, lambda: os.listdir(module.parent)) == "refused"
        # its own worker reads both, and can change neither
        assert harness.tries_as(jail.uid, module.read_bytes) == "done"
        assert harness.tries_as(jail.uid, head.read_bytes) == "done"
        assert harness.tries_as(jail.uid, lambda: module.write_bytes(b"ANSWERS = {}\n")) == "refused"
        assert harness.tries_as(jail.uid, lambda: (module.parent / "planted.py").write_text("")) == "refused"
        assert module.read_bytes() == b"ANSWERS = {'attention': 42}\n"
    finally:
        jail.close()
