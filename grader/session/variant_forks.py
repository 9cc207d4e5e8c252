"""One collected session grades many trees of one task, each in a fork (`grader audit`).

Starting pytest and collecting a hidden suite costs a second or more of CPU, the same for the
reference, the stub and every mutant and alternative of the task, while a mutant's own tests
often take a tenth of that. With `--variant-plan FILE` the session collects once, runs no test
itself, and forks one child per tree the plan lists, each while it holds one of the slots that
the run's sessions share (`grader.processes.slots`): the child points the session at its tree, runs
the tests (the concept's first, when it stops at a concept) and writes that tree's score report.
Each child starts from the collected, untouched parent, so no child inherits another's results,
modules or caches: no process reached by one tree's code serves another.

With `"warm": true` the parent grades the plan's first tree itself before it forks: the course's
own reference, whose grading fills the oracles' caches (expected values, reference models) that
every child would otherwise compute again. Only a tree of the course's own may be graded so: a
child inherits what the parent's tree left in memory.

In process (`--backend inprocess`), the warm grading also records which of the reference's
top-level definitions each test reaches (`grader.session.reach`); a child then runs only the tests
that reach a definition its tree changed, and takes the others' results from the reference's.

Each tree is graded in a working folder of its own (`workdir`), not where the audit started: a
mutant that writes to a relative path (an output path made None writes ./None) writes there.

The plan is JSON: {"slots": {"folder": DIR, "count": N}, "warm": bool, "trees": [{"impl": DIR,
"report": PATH, "basetemp": DIR, "workdir": DIR, "stop_on_concept": CONCEPT or null, "limit_s": seconds}, ...]}.
The parent is the watchdog: a child past its limit is killed, and a child that ends without a report gets one from
the parent saying how it ended.
"""
from __future__ import annotations

import gc
import json
import math
import os
import sys
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from _pytest.tmpdir import TempPathFactory

from grader.course import locate_module
from grader.processes.forks import Ending, Fork, waiting_on
from grader.processes.slots import POLL_S, SharedSlots
from grader.schema.record import new_run_id
from grader.schema.report import ScoreReport, TestResult, write_report
from grader.session.plugin import concept_first, grading_session
from grader.session.reach import ReachRecorder, needs_running


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    plan_path = session.config.getoption("variant_plan")
    if not plan_path or session.config.option.collectonly:
        return None
    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    slots = SharedSlots.from_json(plan["slots"])
    waiting: list[dict] = list(plan["trees"])
    reference = None
    if plan.get("warm") and waiting:
        warm_slot = slots.wait_for_one()
        reference = _grade_warm(session, waiting.pop(0))
        slots.give_back(warm_slot)
        session.shouldstop = session.shouldfail = False
    # What the session holds now lives on in every child: frozen, the garbage collections a
    # child runs scan only its own objects, and leave the pages it shares with its parent shared.
    gc.collect()
    gc.freeze()
    running: dict[Fork, tuple[dict, int]] = {}       # each child: its tree, its slot
    while waiting or running:
        while waiting and (slot := slots.take()) is not None:
            variant = waiting.pop(0)
            child = Fork.start(partial(_grade_in_child, session, variant, reference, slots), variant["limit_s"])
            running[child] = (variant, slot)
        ended, _ = waiting_on(running, POLL_S if waiting else math.inf)
        for child in ended:
            variant, slot = running.pop(child)
            _report_ending(variant, child.reap())
            slots.give_back(slot)
    return True          # the parent itself runs no test


def _grade_in_child(session, variant: dict, reference: _Reference | None, slots: SharedSlots) -> int:
    slots.forget_inherited()
    _renew_torch_thread_pool()
    return _grade(session, variant, reference=reference)


def _report_ending(variant: dict, ending: Ending) -> None:
    """A tree whose child was killed, or left no report, gets one that says how it ended."""
    report = Path(variant["report"])
    if ending.exited and report.exists():
        return
    why = f"ran past its time limit ({variant['limit_s']:.0f} s)" if ending.overdue else \
        "ended without a score report" if ending.exited else f"process {ending}"
    write_report(ScoreReport.failed(f"the grading {why}", {"path": variant["impl"]}), report)


def _renew_torch_thread_pool() -> None:
    """torch leaves a forked child its parent's thread pool marked for renewal at the next use;
    two threads of the child using it first at once (a model's weights loaded by several) can
    both renew it, and one is left with no pool ("Invalid thread pool!"). Setting the thread
    count here, before any thread exists, renews it once."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(torch.get_num_threads())


@dataclass
class _Reference:
    """The warm tree's grading: a child's test that reaches nothing its tree changed takes its
    result from here instead of running."""
    results: dict[str, TestResult]
    recorder: ReachRecorder

    def duration(self, item) -> float:
        """How long `item` took on the reference (an unknown test last)."""
        result = self.results.get(item.nodeid)
        return result.duration_s if result is not None else math.inf

    def results_to_take(self, items, module: Path) -> dict[str, TestResult]:
        """The results of `items` that need not run on a tree whose module is at `module`: tests
        that passed (or were skipped) on the reference and reached nothing the tree changed."""
        try:
            changed = self.recorder.changed_in(module.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            return {}
        taken, reached = {}, self.recorder.reached
        for item in items:
            result = self.results.get(item.nodeid)
            if result is not None and result.status in ("passed", "skipped") and item.nodeid in reached \
                    and not needs_running(reached[item.nodeid], changed):
                taken[item.nodeid] = result
        return taken


def _grade_warm(session, variant: dict) -> _Reference | None:
    """In the parent: grade the course's reference, recording in process what each test reaches."""
    recorder = _recorder(session, Path(variant["impl"]))
    _grade(session, variant, recorder=recorder)
    return None if recorder is None else _Reference(dict(grading_session(session.config).results), recorder)


def _recorder(session, impl: Path) -> ReachRecorder | None:
    """A recorder of the module at `impl`, where learner code runs in this process and loads."""
    grading = grading_session(session.config)
    if grading.spec.backend != "inprocess" or not session.items:
        return None
    try:
        return ReachRecorder(locate_module(impl, grading.task_of(session.items[0])))
    except (Exception, SystemExit):       # it does not load: its grading says why, and every tree runs whole
        return None


def _grade(session, variant: dict, recorder: ReachRecorder | None = None, reference: _Reference | None = None) -> int:
    """The session's tests, run on the variant's tree (those `reference` does not answer for);
    the exit code."""
    config = session.config
    concept = variant.get("stop_on_concept")
    Path(variant["workdir"]).mkdir(parents=True, exist_ok=True)
    os.chdir(variant["workdir"])
    # The tree's own pytest folder: pytest empties its base folder when first asked for it, which
    # a sibling fork graded at the same time must not have done to this one's files.
    config.option.basetemp = variant["basetemp"]
    config._tmp_path_factory = TempPathFactory.from_config(config, _ispytest=True)
    grading = grading_session(config)
    grading.grade_another(grading.spec.but(impl=Path(variant["impl"]).resolve(), run_id=new_run_id(),
                                           stop_on_concept=concept, score_report=Path(variant["report"])))
    items = session.items
    if concept:
        # A mutant is killed by any failing test of its concept: the quickest on the reference run first.
        concept_first(items, concept, reference.duration if reference is not None else lambda item: 0.0)
    grading.expect(items)
    taken = reference.results_to_take(items, locate_module(grading.spec.impl, grading.task_of(items[0]))) \
        if reference is not None and items else {}
    running = [item for item in items if item.nodeid not in taken]
    following = dict(zip(running, running[1:] + [None]))
    for item in items:
        if item.nodeid in taken:
            grading.take(item, taken[item.nodeid])
            continue
        with recorder.test(item.nodeid) if recorder is not None else nullcontext():
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=following[item])
        if session.shouldfail or session.shouldstop:
            break
    write_report(grading.build_report(), Path(variant["report"]))
    return 0
