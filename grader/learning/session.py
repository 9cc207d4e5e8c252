"""One self-check of one task, in children forked from a warm process.

The parent has imported pytest, the libraries and the visible tests' helpers once; each check
forks fresh children (two where there are two cores) that run the task's visible suite in-process
(`--backend inprocess`, the session a `grader check` would run, see
`grader.running.runner.GradingRun`), each its share of the tests, so whatever the learner's module
does (never import, loop, crash, leak) dies with them. Every child collects the same tests and
takes its share by the longest each test has taken in earlier checks (`shares_of`: the longest
first, each to the child with the least work so far), so the shares need no talking and end close
together.
The next check's children are forked ahead (`prepare`, once a check has ended): each starts
pytest and collects the visible tests, then waits for the word to run them, so that a save costs
only the tests. They have not loaded the learner's module (its tests load it, after the word):
each child still serves one check and dies with it.
Each child tells the parent, over a pipe, each test as it starts (with its time limit) and each
result as it ends; the parent is the watchdog: a test that outlives its own time limit gets its
child killed, and the report says which test it was, with the results of the tests before it
(and every result of the other child). The report is the children's, merged in the suite's order.
"""
from __future__ import annotations

import json
import math
import os
import select
import signal
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest

from grader.course import Task
from grader.learning.warm import is_library_module, one_torch_thread
from grader.processes.forks import Fork, waiting_on
from grader.running.runner import PARTS, GradingRun
from grader.schema.report import ReportError, ScoreReport, TestResult, read_report, write_report
from grader.session.plugin import grading_session, time_limit

# pytest-timeout ends an over-long test inside the child at its own limit; the parent waits this
# much longer (the child's own report is the better one) before it kills a child whose learner
# code swallowed that timeout or loops where no signal reaches.
WATCHDOG_MARGIN_S = 3.0
POLL_S = 0.05           # how often the parent looks at a running child: well under the 2 s budget
STOPPED_AT_TIMEOUT = "stopped after a test ran past its time limit: the tests after it were not run"
SHARES = 2              # children per check, at most one per core
UNTIMED_S = 0.1         # what a test not timed yet counts for in the shares
ENDINGS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}     # how a person or the system ends a watcher


@dataclass
class CheckResult:
    report: ScoreReport
    seconds: float               # from the fork to the report in hand
    log_path: Path               # the first child's pytest output (the others' lie beside it)
    cancelled: bool = False      # a newer save arrived: this check was dropped unfinished
    imported: list[str] = field(default_factory=list)     # libraries the check loaded beyond the parent's


class CheckChild:
    """Runs checks of `task` for the learner's tree `impl`, its files kept under `workdir`."""

    def __init__(self, task: Task, impl: Path, workdir: Path, shares: int | None = None):
        self.task, self.impl, self.workdir = task, Path(impl), Path(workdir)
        self.shares = shares or max(1, min(SHARES, len(os.sched_getaffinity(0))))
        for share in range(self.shares):
            (self.workdir / f"tmp{share}").mkdir(parents=True, exist_ok=True)    # pytest makes only the last level
        self.runs = 0
        self.durations: dict[str, float] = {}      # test id -> the longest it has taken in a check
        self._ready: list[_Child] = []             # the next check's children, forked ahead

    def arguments(self, share: int, run: int) -> tuple[list[str], Path]:
        """pytest's arguments for one child of check number `run` (the visible suite, in-process,
        seed 0 as `grader check` uses) and where its score report lands."""
        out_dir = self.workdir / f"out{share}"
        job = GradingRun(self.impl, [self.task], hidden=False, backend="inprocess", seed=0)
        args = job.sessions(out_dir, self.workdir / f"tmp{share}", f"watch-{os.getpid()}-{run}")[0]
        return args, out_dir / PARTS / f"{self.task.name}.json"

    def prepare(self) -> None:
        """Fork the next check's children now (they collect the tests and wait): call it once a
        check has ended and the watcher holds what the next one should find loaded."""
        self.discard()
        with _endings_held():
            self._ready = self._fork()

    def discard(self) -> None:
        """Drop the children forked ahead (a visible test file changed, or the watcher leaves)."""
        for child in self._ready:
            os.close(child.go_fd)
            os.close(child.read_fd)
            child.process.end_now()
        self._ready = []

    def _fork(self) -> list[_Child]:
        run = self.runs + 1
        children: list[_Child] = []
        for share in range(self.shares):
            args, report_path = self.arguments(share, run)
            report_path.unlink(missing_ok=True)
            read_fd, write_fd = os.pipe()
            go_read_fd, go_fd = os.pipe()
            log_path = self.workdir / ("pytest.log" if share == 0 else f"pytest-{share}.log")
            others = (read_fd, go_fd, *(end for c in children for end in (c.read_fd, c.go_fd)))
            process = Fork.start(partial(_child, args, write_fd, go_read_fd, log_path, others,
                                         (share, self.shares, self.durations)))
            os.close(write_fd)
            os.close(go_read_fd)
            children.append(_Child(process, read_fd, go_fd, report_path, log_path))
        return children

    def check(self, on_test=None, cancelled=lambda: False) -> CheckResult:
        """One check, on the children forked ahead if there are (else forked now). `on_test(title,
        limit_s)` is told each test as it starts; `cancelled()` is asked as the check runs, and a
        True drops it (the children killed, the result marked so)."""
        if not self._ready:
            self.prepare()
        children, self._ready = self._ready, []
        self.runs += 1
        started = time.monotonic()
        for child in children:
            child.go()
        try:
            _follow(children, on_test, cancelled)
        finally:
            for child in children:
                os.close(child.read_fd)
                child.process.end_now()         # reaped already, unless killed or interrupted
        for child in children:      # the longest time each test has taken: a failing run is often a short one
            for test, result in child.state.results.items():
                self.durations[test] = max(self.durations.get(test, 0.0), float(result.get("duration_s") or 0.0))
        reports = [_report(c.report_path, c.state.results, c.state.current, c.ending or "exited", self.impl)
                   for c in children]
        imported = sorted({name for child in children for name in child.state.imported})
        order = next((child.state.order for child in children if child.state.order), [])    # any child that collected
        return CheckResult(_merged(reports, order, self.task.name), time.monotonic() - started,
                           children[0].log_path, cancelled=any(c.ending == "cancelled" for c in children),
                           imported=imported)


def shares_of(tests: list[str], durations: dict[str, float], count: int) -> list[set[str]]:
    """The tests of each of `count` children: the longest first (ties in the suite's order), each
    to the child with the least work so far. Every child computes the same shares."""
    loads = [0.0] * count
    shares: list[set[str]] = [set() for _ in range(count)]
    for test in sorted(tests, key=lambda t: -durations.get(t, UNTIMED_S)):      # stable: the suite's order
        least = loads.index(min(loads))
        shares[least].add(test)
        loads[least] += durations.get(test, UNTIMED_S)
    return shares


def _merged(reports: list[ScoreReport], order: list[str], task_name: str) -> ScoreReport:
    """The children's reports as one: the task's tests in the suite's order, every problem said once."""
    found = [(report, task) for report in reports if (task := report.task(task_name)) is not None]
    problems = list(dict.fromkeys(problem for report in reports for problem in report.problems))
    if not found:
        return replace(reports[0], problems=problems)
    position = {test: index for index, test in enumerate(order)}
    tests = sorted((test for _, task in found for test in task.tests), key=lambda test: position.get(test.id, len(position)))
    first, first_task = found[0]
    return replace(first, tasks=[replace(first_task, tests=tests)], problems=problems,
                   stopped_early=next((report.stopped_early for report, _ in found if report.stopped_early), None))


def _child(args: list[str], pipe_fd: int, go_fd: int, log_path: Path, others: tuple[int, ...],
           share: tuple[int, int, dict]) -> int:
    for fd in others:
        os.close(fd)
    for ending in ENDINGS:                      # Ctrl-C at the terminal ends the check at once
        signal.signal(ending, signal.SIG_DFL)   # (not the watcher's way), once they are let through
    signal.pthread_sigmask(signal.SIG_UNBLOCK, ENDINGS)
    one_torch_thread()
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)          # pytest's output, and anything C code prints, goes to the log,
    os.dup2(log, 2)          # never onto the watcher's screen
    return int(pytest.main(args, plugins=[ChildReporter(os.fdopen(pipe_fd, "w"), *share, go_fd=go_fd)]))


@contextmanager
def _endings_held():
    """Ctrl-C, a hang-up or a kill held back while children are forked, and let through after, with
    the children recorded: one that came inside a fork's own handlers (logging's locks) would be
    swallowed there, and one that came between two forks would leave a child nobody reaps."""
    signal.pthread_sigmask(signal.SIG_BLOCK, ENDINGS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, ENDINGS)


class ChildReporter:
    """The child's side (a pytest plugin): it keeps its share of the collected tests (and tells the
    parent the suite's order), waits for the word to run them (`go_fd`), then tells each test's
    start and result, one JSON line each; a test that ran past its time limit ends the session
    (the learner's loop would hang the next tests too), and the last report lists every test of
    the share, run or not."""

    def __init__(self, pipe, share: int = 0, shares: int = 1, durations: dict[str, float] | None = None,
                 go_fd: int | None = None):
        self.pipe, self.go_fd = pipe, go_fd
        self.share, self.shares, self.durations = share, shares, durations or {}
        self.session: pytest.Session | None = None
        self.loaded_before = set(sys.modules)

    def _send(self, message: dict) -> None:
        self.pipe.write(json.dumps(message) + "\n")
        self.pipe.flush()

    def pytest_sessionstart(self, session):
        self.session = session

    @pytest.hookimpl(trylast=True)      # after the grader's own choice and order of the tests
    def pytest_collection_modifyitems(self, config, items):
        order = [item.nodeid for item in items]
        self._send({"order": order})
        if self.shares > 1:
            mine = shares_of(order, self.durations, self.shares)[self.share]
            config.hook.pytest_deselected(items=[item for item in items if item.nodeid not in mine])
            items[:] = [item for item in items if item.nodeid in mine]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        """Collected: wait for the word. The pipe closed without it: the check was dropped before
        it began, and the child leaves without a result."""
        if self.go_fd is None:
            return
        word = os.read(self.go_fd, 1)
        os.close(self.go_fd)
        if not word:
            os._exit(0)
        grading_session(session.config).started = datetime.now(UTC)     # the run record's start: now

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self._send({"test": item.nodeid, "limit_s": time_limit(item)})

    def pytest_runtest_logfinish(self, nodeid, location):
        session = self.session
        assert session is not None, "a test ends after the session starts"
        result = grading_session(session.config).results.get(nodeid)
        if result is None:
            return
        self._send({"result": result.to_json()})
        if result.status == "timeout":
            session.shouldstop = STOPPED_AT_TIMEOUT

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        grading = grading_session(session.config)
        path = grading.spec.score_report
        if path:       # after the grader's own report: the same, plus the tests a stop left unrun
            report = grading.build_report(partial=True)
            if session.shouldstop == STOPPED_AT_TIMEOUT:
                report.problems = [*grading.problems, STOPPED_AT_TIMEOUT]
            write_report(report, Path(path))

    def pytest_unconfigure(self, config):
        """Last, after the terminal's summary: what the check loaded that the watcher had not."""
        self._send({"imported": [name for name, module in list(sys.modules.items())
                                 if name not in self.loaded_before and is_library_module(module)]})


@dataclass
class _Followed:
    """What the parent has heard from a check's child so far."""
    results: dict[str, dict] = field(default_factory=dict)     # test id -> its result, as JSON
    imported: list[str] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # every test the suite collected, in its order
    current: tuple[str, float] | None = None      # the test running now: (nodeid, its time limit)
    deadline: float | None = None                 # when the parent kills the child for it
    pending: bytes = b""                          # a message's start, its end not read yet


@dataclass
class _Child:
    process: Fork
    read_fd: int
    go_fd: int              # the parent's end of the pipe that tells the child to run its tests
    report_path: Path
    log_path: Path
    state: _Followed = field(default_factory=_Followed)
    pipe_closed: bool = False
    ending: str | None = None       # "exited", "timeout", "cancelled" or "signal NAME", once it has ended

    def go(self) -> None:
        try:
            os.write(self.go_fd, b"1")
        except BrokenPipeError:        # it ended before the word (its tests did not collect): `_follow` reads why
            pass
        os.close(self.go_fd)

    def take(self, chunk: bytes, on_test) -> None:
        *lines, self.state.pending = (self.state.pending + chunk).split(b"\n")
        for line in lines:
            _take_message(line, self.state, on_test)
        self.process.deadline = math.inf if self.state.deadline is None else self.state.deadline


def _follow(children: list[_Child], on_test, cancelled) -> None:
    """Read the children's messages until each has ended (its `ending` set); kill one past a
    test's limit, or all when cancelled."""
    running = list(children)
    while running:
        by_fd = {child.read_fd: child for child in running if not child.pipe_closed}
        ended, readable = waiting_on([child.process for child in running], POLL_S, also=by_fd)
        for fd in readable:
            chunk = os.read(fd, 1 << 16)
            if chunk:
                by_fd[fd].take(chunk, on_test)
            else:
                by_fd[fd].pipe_closed = True
        for child in list(running):
            if child.process not in ended:
                continue
            # Its exit is what counts (something it started may hold the pipe open after it): what
            # it wrote before it is read, unless the watchdog ended it.
            ending = child.process.reap()
            while not ending.overdue and select.select([child.read_fd], [], [], 0)[0] and \
                    (rest := os.read(child.read_fd, 1 << 16)):
                child.take(rest, on_test)
            child.ending = "timeout" if ending.overdue else \
                f"signal {ending.signal}" if ending.signal else "exited"
            running.remove(child)
        if running and cancelled():
            for child in running:
                child.process.end_now()
                child.ending = "cancelled"
            return


def _take_message(line: bytes, state: _Followed, on_test) -> None:
    """One line from the child. Learner code shares the child's process and could write to the
    pipe too: a line that is not one of the reporter's messages is ignored, never fatal."""
    try:
        message = json.loads(line)
        if "test" in message:
            test, limit_s = str(message["test"]), float(message["limit_s"])
            state.current, state.deadline = (test, limit_s), time.monotonic() + limit_s + WATCHDOG_MARGIN_S
            if on_test:
                on_test(test.split("::")[-1], limit_s)
        elif "result" in message:
            state.results[str(message["result"]["id"])] = message["result"]
            state.current = state.deadline = None
        elif isinstance(message.get("order"), list):
            state.order = [test for test in message["order"] if isinstance(test, str)]
        elif isinstance(message.get("imported"), list):
            state.imported = [name for name in message["imported"] if isinstance(name, str)]
    except (ValueError, TypeError, KeyError, AttributeError):
        pass


def _report(path: Path, results: dict, current, ending: str, impl: Path) -> ScoreReport:
    """The check's report: the child's own when it finished; else the one it wrote when the tests
    were collected, with the results it sent since, and the test it died in said as such."""
    try:
        report = read_report(path)
    except ReportError:
        why = "was stopped" if ending in ("timeout", "cancelled") else f"died ({ending})"
        return ScoreReport.failed(f"the check {why} before its tests were collected", {"path": str(impl)})
    if ending == "exited":
        return report
    for task in report.tasks:
        for index, test in enumerate(task.tests):
            if test.id in results:
                task.tests[index] = TestResult.from_json(results[test.id], task.task)
            elif current and test.id == current[0] and ending != "cancelled":
                test.status = "timeout" if ending == "timeout" else "crashed"
                test.feedback = (f"did not finish within its time limit of {current[1]:g} s: the check was stopped "
                                 "(a loop that never ends?)" if ending == "timeout" else
                                 f"the process running the test died ({ending}): a crash in native code, "
                                 "or os._exit?")
    if ending == "timeout":
        report.problems = [STOPPED_AT_TIMEOUT]      # in place of the partial report's "not run yet"
    return report
