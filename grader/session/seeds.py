"""The seed of a grading: hidden inputs drawn per submission, from a seed a learner cannot predict.

A suite's random inputs come from the `seed` and `rng` fixtures. With one seed for every grading,
a module that only replays what earlier feedback showed (the expected values of the same inputs)
earns their points without any implementation. So an official grading's seed is derived from a
secret of the course (`Course.secret_file`: made on first use, kept with the course, never released, in
no learner-visible file, and sealed from the worker at every isolation level), the digests of the
submission's module files and its commit: another submission, or the same one changed or
committed again, gets other inputs; regrading the same submission gets the same inputs, and the
same grade. `--seed N` still forces one seed; the report's record says which it was (`seed_from`).
"""
from __future__ import annotations

import hashlib
import logging
import os
import secrets
from pathlib import Path

from grader.course import COURSE, Task, locate_module
from grader.session.intake import jailed_commit, read_module, sha256
from grader.worker.loading import StudentImportError

log = logging.getLogger(__name__)

SEED_BITS = 31                         # the plugin's seeds are plain non-negative ints
FROM_SUBMISSION = "course secret, the submission's module digests and its commit"
FORCED = "--seed"


def course_secret(path: Path = COURSE.secret_file) -> bytes:
    """The course's secret, made (readable by its owner only) the first time it is asked for."""
    try:
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError) as exc:
        log.debug("no course secret read from %s (%s): making one", path, exc)
    value = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(value.hex() + "\n")
    return value


def submission_seed(root: Path, tasks: list[Task], secret: bytes | None = None) -> int:
    """The seed of a submission tree's grading: the course secret and, by task, everything its
    jail holds of the submission: the module's digest (a missing or unreadable module counts as
    such) and the commit beside it (`intake.jailed_commit`). A commit changes the seed, so a
    module whose bytes stay the same while what it reads beside itself changes is drawn new inputs."""
    held = []
    for task in sorted(tasks, key=lambda t: t.name):
        module = locate_module(root, task)
        try:
            module_digest = sha256(read_module(root, module))
        except StudentImportError:
            module_digest = "missing"
        held.append(f"{task.name}:{module_digest}:{jailed_commit(module, root, task.course.root)}")
    digest = hashlib.sha256((secret if secret is not None else course_secret()) + "\n".join(held).encode()).digest()
    return int.from_bytes(digest[:8], "little") % (1 << SEED_BITS)
