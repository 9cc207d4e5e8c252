"""A hostile learner against the commit time a clone is handed in at: a repository whose own
configuration asks git to run a program (to check the commit's signature, a filter, a monitor,
hooks), and an object that is a pipe no one writes. No program of the learner's runs, and a pipe
costs the commit time alone, within its timeout. (A backdated commit is flagged as a time the
learner set: test_gradebook_inputs.py.)"""
import os
import subprocess
from datetime import datetime
from pathlib import Path

from grader.gradebook.handed_in import COMMIT_TIME, FILE_TIMES, received
from grader.session import intake
from grader.worker.loading import load_module

term = load_module(Path(__file__).resolve().parent.parent / "term_course.py")
BACKDATED = datetime.fromisoformat("2026-10-01T09:00:00+08:00")     # committed after the deadline, dated before it


def _signed_head(clone: Path) -> str:
    """HEAD replaced by a commit that claims a signature, which `git log` under `log.showSignature`
    hands to `gpg.program` to verify."""
    git = ["git", "-C", str(clone)]
    tree = subprocess.run([*git, "rev-parse", "HEAD^{tree}"], check=True, capture_output=True, text=True).stdout.strip()
    stamp = int(BACKDATED.timestamp())
    body = (f"tree {tree}\nauthor l <l@x> {stamp} +0800\ncommitter l <l@x> {stamp} +0800\n"
            "gpgsig -----BEGIN PGP SIGNATURE-----\n \n abc\n -----END PGP SIGNATURE-----\n\nsigned\n")
    commit = subprocess.run([*git, "hash-object", "-t", "commit", "-w", "--stdin"], input=body, check=True,
                            capture_output=True, text=True).stdout.strip()
    subprocess.run([*git, "update-ref", "HEAD", commit], check=True)
    return commit


def test_a_repository_that_asks_git_to_run_programs_runs_none(tmp_path):
    clone = term.submission(tmp_path / "mallory", term.REFERENCE, triple=False)
    term.commit_all(clone, BACKDATED)
    commit = _signed_head(clone)
    canary = tmp_path / "ran"
    program = tmp_path / "program"
    program.write_text(f"#!/bin/sh\ntouch {canary}\n")
    program.chmod(0o755)
    (clone / ".git" / "hooks").mkdir(exist_ok=True)
    for hook in ("post-checkout", "pre-commit", "reference-transaction"):
        (clone / ".git" / "hooks" / hook).symlink_to(program)
    with (clone / ".git" / "config").open("a") as config:
        config.write(f"[log]\n\tshowSignature = true\n[gpg]\n\tprogram = {program}\n[core]\n\tfsmonitor = {program}\n"
                     f"\tpager = {program}\n[filter \"x\"]\n\tsmudge = {program}\n")
    # the bait works: git reading the commit as that repository's own configuration says runs the program
    subprocess.run(["git", "-C", str(clone), "log", "-1", "--format=%cI"], check=True, capture_output=True)
    assert canary.exists()
    canary.unlink()

    handed_in = received(clone, None)
    assert not canary.exists(), "the learner's program ran while the grader read the commit's time"
    assert handed_in.at == BACKDATED and handed_in.source == f"{COMMIT_TIME} ({commit[:12]})"


def test_an_object_that_never_answers_costs_the_commit_time_alone(tmp_path, monkeypatch):
    clone = term.submission(tmp_path / "mallory", term.REFERENCE, triple=False)
    commit = term.commit_all(clone, BACKDATED)
    loose = clone / ".git" / "objects" / commit[:2] / commit[2:]
    loose.unlink()
    os.mkfifo(loose)                              # opened for reading, it blocks until a writer comes: none will
    monkeypatch.setattr(intake, "GIT_TIMEOUT_S", 1)
    handed_in = received(clone, None)
    assert handed_in.source == FILE_TIMES and handed_in.at is not None
