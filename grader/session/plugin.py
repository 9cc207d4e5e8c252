"""The pytest plugin (entry point `pytest11`): options, markers, the `submission` fixture and
the score report. One hook per concern; every option is registered here.

It acts only on tests that live in a task folder of the course graded (`exercises/NN_name/` or
`tests/hidden/NN_name/`); any other test runs as if the plugin were absent. What the session
grades, and how, is its `GradingSpec` (`grader.spec`): the runner's, given whole with
`--grading-spec`, or else made from the options below, which are a plain `pytest` run's edge.
"""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from grader import logs, spec
from grader.course import Task, locate_module
from grader.isolation import levels, uid_jail
from grader.isolation.worker_host import WorkerSpec
from grader.schema.record import git_commit, new_run_id, run_record
from grader.schema.report import (
    NO_GPU,
    NO_SOCKETS,
    NOT_RUN,
    ModuleInfo,
    ScoreReport,
    TaskResult,
    TestResult,
    write_report,
)
from grader.session import intake
from grader.session.intake import read_module
from grader.session.outcome import (
    OUTPUT_LIMIT,
    as_artifacts,
    failure_text,
    phase_outcome,
    score_lines,
    tail,
    truncate,
    with_concept,
)
from grader.session.submission import BACKENDS, Backend, BackendContext, CallTimeout, CourseFault, StudentError, Submission
from grader.spec import ANY_CONCEPT, GradingSpec
from grader.suite import metadata
from grader.worker.dispatch import is_test_timeout
from grader.worker.loading import Location, StudentImportError, describe, function_location

CALL_MARGIN_S = 2.0          # a call gives up this long before pytest-timeout would end the test
_SESSION = pytest.StashKey["GradingSession"]()
_OUTPUT = pytest.StashKey[str]()
_ARTIFACTS = pytest.StashKey[dict]()
_SUBMISSION = pytest.StashKey[Submission]()


def pytest_addoption(parser):
    group = parser.getgroup("grader", "grading the course's exercises")
    group.addoption("--grading-spec", metavar="JSON",
                    help="grade as this file says (grader.spec; the runner writes it): the options below are "
                         "then not given")
    group.addoption("--course", default=os.environ.get("GRADER_COURSE"), metavar="DIR",
                    help="the course whose task folders are graded (env GRADER_COURSE; default: this package's)")
    group.addoption("--impl", default=os.environ.get("GRADER_IMPL"), metavar="DIR",
                    help="tree holding NN_name/<module>.py to test (env GRADER_IMPL; default: exercises/)")
    group.addoption("--backend", choices=sorted(BACKENDS), default=os.environ.get("GRADER_BACKEND", "inprocess"),
                    help="run learner code in this process or in a worker process (env GRADER_BACKEND)")
    group.addoption("--isolation", choices=levels.CHOICES, default=os.environ.get("GRADER_ISOLATION", "auto"),
                    help="workers in the sandbox: where possible (auto), or refuse to grade without it "
                         "(required), or never (none) (env GRADER_ISOLATION)")
    group.addoption("--grader-seed", type=int, default=int(os.environ.get("GRADER_SEED", "0")),
                    help="seed of the `seed` and `rng` fixtures (env GRADER_SEED; default 0)")
    group.addoption("--score-report", metavar="PATH", help="write the score report as JSON to PATH")
    group.addoption("--worker-logs", metavar="DIR", help="keep the workers' output logs in DIR")
    group.addoption("--stop-on-concept", metavar="CONCEPT",
                    help="stop once a test of this concept has failed, or any test: '*' (used by `grader audit`)")
    group.addoption("--long", action="store_true", help="also run the long visible checks")
    group.addoption("--variant-plan", metavar="JSON",
                    help="grade each tree this file lists in a fork of the collected session (used by `grader audit`; "
                         "grader.session.variant_forks)")


def pytest_configure(config):
    logs.configure()
    config.addinivalue_line("markers", "points(n): the test is worth n points in the score report")
    config.addinivalue_line("markers", "concept(name): the README section a failure sends the learner to")
    config.addinivalue_line("markers", "gpu(n=1): needs n CUDA devices; skipped and not graded on machines with fewer")
    config.addinivalue_line("markers", "distributed: runs ranks of a process group, which need sockets; skipped and "
                                       "not graded at the uid level, which refuses learner code sockets")
    config.addinivalue_line("markers", "long: a visible check that takes minutes; deselected unless --long is given")
    grading = config.stash[_SESSION] = GradingSession(config, _spec(config))
    config.pluginmanager.register(ReportHooks(grading), "grader-report")
    if grading.spec.backend == "worker":
        _hypothesis_storage_of_this_session_only(config)


def _hypothesis_storage_of_this_session_only(config) -> None:
    """hypothesis keeps a folder in the working folder (`.hypothesis`: the suites write no example
    database, but it caches the constants of the sources it reads), which is the course root: an
    official grading writes nothing there, and nothing one grading leaves (nor a learner's worker,
    which may write the session's scratch folder) steers the examples of another. A private
    folder, gone with the session."""
    folder = tempfile.TemporaryDirectory(prefix="grader-hypothesis-")
    config.add_cleanup(folder.cleanup)
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = folder.name       # read on hypothesis's first storage use
    if "hypothesis" in sys.modules:                                  # already imported (the pool's base)
        from hypothesis.configuration import set_hypothesis_home_dir
        set_hypothesis_home_dir(folder.name)


_GRADING_OPTIONS = ("course", "impl", "backend", "isolation", "grader_seed", "score_report", "worker_logs",
                    "stop_on_concept")


def _spec(config) -> GradingSpec:
    """The runner's spec as given, or a plain run's made from its options (and, at the uid level,
    the course sealed from learner code once the level is known)."""
    path = config.getoption("grading_spec")
    if path is None:
        try:
            made = spec.from_options(config.option, os.environ)
        except levels.IsolationUnavailable as exc:
            raise pytest.UsageError(str(exc)) from None
    else:
        flags = [f"--{name.replace('_', '-')}" for name in _GRADING_OPTIONS]
        given = [arg for arg in map(str, config.invocation_params.args) if arg.split("=")[0] in flags]
        if given:
            raise pytest.UsageError(f"--grading-spec says how to grade: leave out {given[0].split('=')[0]}")
        made = GradingSpec.read(Path(path))
    if made.isolation["level"] == "uid":
        uid_jail.seal()
    return made


class GradingSession:
    """State of one pytest run: the backends per task and the results collected so far."""

    def __init__(self, config, graded: GradingSpec):
        self.config = config
        self.spec = graded
        self.started = datetime.now(UTC)
        self.run_id = graded.run_id or new_run_id(self.started)
        self._tmp_logs: tempfile.TemporaryDirectory | None = None
        self._course_commit: str | None = None
        self._suite_versions: dict[tuple[str, bool], str] = {}     # (task, hidden) -> `Task.suite_sha256`
        self._no_results_yet()

    def _no_results_yet(self) -> None:
        self.results: dict[str, TestResult] = {}
        self.expected: dict[str, TestResult] = {}     # every collected test, as it would stand if never run
        self.tasks: dict[str, Task] = {}
        self.problems: list[str] = []
        self._course_faults: set[str] = set()      # each recorded once, not once per test it failed
        self.stopped_early: str | None = None
        self._backends: dict[str, Backend] = {}
        self._expected_tasks: dict[str, Task] = {}

    def backend_for(self, task: Task):
        if task.name not in self._backends:
            worker = WorkerSpec(level=self.spec.isolation["level"], limits=self.spec.limits, course=self.spec.course,
                                probe_files=tuple(task.probe_files()), writable_dirs=(self._basetemp(),))
            context = BackendContext(self.spec.impl, self._log_dir() / f"{task.name}.log", worker)
            self._backends[task.name] = BACKENDS[self.spec.backend](locate_module(self.spec.impl, task), context)
        return self._backends[task.name]

    def grade_another(self, graded: GradingSpec) -> None:
        """Point this session, collected, at another tree, with nothing of what it graded before:
        a fork of it grades one variant (`grader.session.variant_forks`)."""
        for backend in self._backends.values():
            backend.close()
        self._no_results_yet()
        self.spec, self.started = graded, datetime.now(UTC)
        self.run_id = graded.run_id or new_run_id(self.started)

    def _basetemp(self) -> Path:
        """pytest's temporary folder of this session: the one place a sandboxed worker may write,
        so that files cross between tests and learner code as paths."""
        return self.config._tmp_path_factory.getbasetemp()

    def _log_dir(self) -> Path:
        if self.spec.worker_logs:
            self.spec.worker_logs.mkdir(parents=True, exist_ok=True)
            return self.spec.worker_logs
        if self._tmp_logs is None:
            self._tmp_logs = tempfile.TemporaryDirectory(prefix="grader-logs-")
        return Path(self._tmp_logs.name)

    def task_done(self, task: Task, following: Task | None, stopping: bool = False) -> None:
        """The task's tests are over: its workers go (their memory back to the box) and the next
        task's sandbox starts, so that a session of several tasks holds one task's workers at a
        time. (Official grading goes further: each task is its own session, `grader.running.pool`.)"""
        backend = self._backends.get(task.name)
        if backend is not None:
            backend.close()
        if following is not None and not stopping:
            self.backend_for(following).launch()

    def expect(self, items) -> None:
        """Every test the session will run, so that a report written before they run lists them
        (as not graded yet): a grading process that dies leaves that report, not nothing."""
        for item in items:
            task = self.task_of(item)
            self.expected[item.nodeid] = replace(self.new_result(item, task), status="error", feedback=NOT_RUN)
            self._expected_tasks.setdefault(task.name, task)
        if self.spec.score_report and self.expected:
            write_report(self.build_report(partial=True), self.spec.score_report)

    def worker_startup_seconds(self) -> list[float]:
        return [s for b in self._backends.values() for s in getattr(b, "startup_seconds", [])]

    def close(self) -> None:
        for backend in self._backends.values():
            backend.close()
        if self._tmp_logs is not None:
            self._tmp_logs.cleanup()

    # ------------------------------------------------------------ results

    def observe(self, item, when: str, report, excinfo) -> None:
        task = self.task_of(item)
        result = self.results.get(item.nodeid)
        if result is None:
            self.tasks.setdefault(task.name, task)
            result = self.results[item.nodeid] = self.new_result(item, task)
        result.duration_s = round(result.duration_s + report.duration, 3)
        submission = getattr(item, "funcargs", {}).get("submission")
        outcome = phase_outcome(when, report, excinfo, hidden=result.suite == "hidden",
                                broken=submission.failure if isinstance(submission, Submission) else None,
                                may_go_ungraded=metadata.of_item(item).may_go_ungraded)
        if excinfo is not None and isinstance(excinfo.value, CourseFault):
            if str(excinfo.value) not in self._course_faults:
                self._course_faults.add(str(excinfo.value))
                self.problems.append(f"{item.nodeid}: {excinfo.value}")
        if outcome is not None and result.status == "passed":
            status, feedback, graded = outcome
            result.status, result.graded = status, graded
            if excinfo is not None and getattr(excinfo.value, "concept", None):
                result.concept = excinfo.value.concept    # a test of several concepts names the broken one
            result.feedback = with_concept(feedback, result.concept, status)
            if when == "call" and status != "skipped":
                result.location = _learner_location(item, excinfo)
        if when == "teardown" and _OUTPUT in item.stash:      # what the learner's code printed, nothing of the test's own
            result.output = tail(item.stash[_OUTPUT], OUTPUT_LIMIT)
        if when == "teardown" and item.stash.get(_ARTIFACTS, None):
            result.artifacts = as_artifacts(item.stash[_ARTIFACTS])

    def take(self, item, result: TestResult) -> None:
        """The result of a grading of another tree, for a test this one does not run (the audit's
        selection, `grader.session.variant_forks`)."""
        self.tasks.setdefault(result.task, self.task_of(item))
        self.results[item.nodeid] = replace(result)

    def build_report(self, partial: bool = False) -> ScoreReport:
        """The score report of the tests run so far. `partial`: written while the grading goes on,
        so it also lists, as errors, the tests that have not run yet, and says so in `problems`;
        the final report replaces it."""
        finished = datetime.now(UTC)
        results = dict(self.results)
        tasks_seen = dict(self.tasks)
        problems = list(self.problems)
        if partial:
            waiting = {nodeid: result for nodeid, result in self.expected.items() if nodeid not in results}
            results.update(waiting)
            tasks_seen.update({r.task: self._expected_tasks[r.task] for r in waiting.values()})
            if waiting:
                problems.append(f"the grading ended before {len(waiting)} test(s) had run: they are not graded")
        tasks = []
        for name in sorted(tasks_seen):
            task = tasks_seen[name]
            tests = [r for r in results.values() if r.task == name]
            tasks.append(TaskResult(task.name, task.title, self._module_info(task), tests,
                                    self._suite_sha256(task, hidden=any(t.suite == "hidden" for t in tests))))
        report = ScoreReport(run={}, submission={"path": str(self.spec.impl), "commit": intake.git_head(self.spec.impl)},
                             tasks=tasks, problems=problems, stopped_early=self.stopped_early,
                             isolation=self.spec.isolation)
        total = report.total
        startup = self.worker_startup_seconds()
        metrics = {"score": total.points, "max_score": total.max_points, "percent": total.percent,
                   "tests": len(results),
                   "worker_startup_s": round(max(startup), 3) if startup else None}
        config = {"backend": self.spec.backend, "isolation": self.spec.isolation["level"], "impl": str(self.spec.impl),
                  "tasks": sorted(self.tasks), "seed_from": self.spec.seed_from,
                  "args": [str(a) for a in self.config.args]}
        if self._course_commit is None:
            self._course_commit = git_commit(self.spec.course.root) or ""
        report.run = run_record(run_id=self.run_id, started=self.started, finished=finished,
                                commit=self._course_commit or None, config=config, seed=self.spec.seed,
                                metrics=metrics)
        return report

    def _suite_sha256(self, task: Task, hidden: bool) -> str:
        if (task.name, hidden) not in self._suite_versions:
            self._suite_versions[task.name, hidden] = task.suite_sha256(hidden)
        return self._suite_versions[task.name, hidden]

    def _module_info(self, task: Task) -> ModuleInfo:
        path = locate_module(self.spec.impl, task)
        backend = self._backends.get(task.name)
        try:      # the bytes the worker was given, where it was: what the digest names is what ran
            data = backend.module_bytes if backend is not None and backend.module_bytes is not None \
                else read_module(self.spec.impl, path)
        except StudentImportError as exc:
            return ModuleInfo(str(path), path.exists(), None, [f"not graded: {exc}"])
        digest = intake.sha256(data)
        reference = task.reference_module
        flags = ["identical to the course's reference solution"] \
            if reference.is_file() and digest == intake.sha256(reference.read_bytes()) \
            and self.spec.impl != self.spec.course.solutions.resolve() else []
        return ModuleInfo(str(path), True, digest, flags)

    # ------------------------------------------------------------ the course's tests

    def in_task(self, item) -> bool:
        return self.spec.course.task_of_path(item.path) is not None

    def task_of(self, item) -> Task:
        """The task of a test the session grades (one `in_task` let through)."""
        task = self.spec.course.task_of_path(item.path)
        assert task is not None, f"{item.nodeid} is not in a task's folder"
        return task

    def new_result(self, item, task: Task) -> TestResult:
        meta = metadata.of_item(item)
        if meta.points is None:
            raise pytest.UsageError(f"{item.nodeid} has no @pytest.mark.points(n): every graded test declares its points")
        suite = "hidden" if self.spec.course.is_hidden(item.path) else "visible"
        return TestResult(id=item.nodeid, task=task.name, suite=suite, title=meta.title, status="passed",
                          graded=True, max_points=meta.points, concept=meta.concept)


def grading_session(config) -> GradingSession:
    """The session's grading state, for the plugins that extend a learner's own run
    (`grader.learning`: the watcher's child, the progress a self-check leaves)."""
    return config.stash[_SESSION]


def time_limit(item) -> float:
    """The test's own time limit in seconds (its timeout marker, else pytest-timeout's setting)."""
    return _test_timeout(item)


def _learner_frames(item, excinfo) -> list[dict]:
    """The learner's own frames of what their code raised, or of where it was running when the
    test's time limit stopped it (in this process: the interrupted traceback; in their worker: the
    line its stacks named, `CallTimeout.location`); the outermost first ([] otherwise)."""
    exc = excinfo.value if excinfo is not None else None
    if isinstance(exc, StudentError):
        return list(exc.info.get("frames") or [])
    submission = item.stash.get(_SUBMISSION, None)
    if submission is None:
        return []
    if isinstance(submission.failure, CallTimeout) and submission.failure.location:
        return [dict(submission.failure.location)]
    if exc is not None and is_test_timeout(exc):
        return describe(exc, submission.module_path)["frames"]
    return []


def _learner_location(item, excinfo) -> Location | None:
    """The learner's line a failure points at: the deepest of `_learner_frames`; else the line that
    gave the result of the last function of theirs the test called (see `function_location`; whose
    result was wrong, or which crashed its worker)."""
    if frames := _learner_frames(item, excinfo):
        frame = frames[-1]
        return Location(line=frame["line"], function=frame["function"], code=frame["code"])
    submission = item.stash.get(_SUBMISSION, None)
    if submission is None or submission.last_called is None:
        return None
    return function_location(submission.module_path, submission.last_called)


# ---------------------------------------------------------------- hooks

class ReportHooks:
    """The hooks that feed and publish the session's results (registered per run)."""

    def __init__(self, grading: GradingSession):
        self.grading = grading

    def pytest_sessionstart(self, session):
        """Start the sandbox of the first task named on the command line (its zygote imports the
        libraries) before collection imports the suites, so that the two overlap. The other
        tasks' sandboxes start as each task begins: one task's workers at a time. A session that
        forks per variant grades no tree of its own: its children start theirs."""
        if session.config.getoption("variant_plan"):
            return
        for arg in session.config.args:
            task = self.grading.spec.course.task_of_path(Path(str(arg).split("::")[0]))
            if task is not None:
                self.grading.backend_for(task).launch()
                return

    def pytest_collection_modifyitems(self, items):
        for item in items:
            if self.grading.in_task(item):
                self.grading.new_result(item, self.grading.task_of(item))   # fail fast on a test without points

    def pytest_collection_finish(self, session):
        self.grading.expect([item for item in session.items if self.grading.in_task(item)])

    def pytest_collectreport(self, report):
        if report.failed and self.grading.spec.course.task_of_path(Path(str(report.fspath))) is not None:
            last_line = str(report.longrepr).strip().splitlines()[-1] if report.longrepr else ""
            self.grading.problems.append(f"could not collect {report.nodeid}: {truncate(last_line, 300)}")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if self.grading.in_task(item):
            self.grading.observe(item, call.when, report, call.excinfo)
            result = self.grading.results[item.nodeid]
            if report.failed and result.suite == "visible" and not item.config.option.fulltrace:
                report.longrepr = failure_text(result, _learner_frames(item, call.excinfo))
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        result = yield
        concept = self.grading.spec.stop_on_concept
        outcome = self.grading.results.get(item.nodeid)
        if concept and outcome and outcome.lost and concept in (ANY_CONCEPT, outcome.concept):     # a skipped GPU test: not lost
            self.grading.stopped_early = item.session.shouldstop = \
                "a test failed" if concept == ANY_CONCEPT else f"a test of concept {concept!r} failed"
        task = self.grading.spec.course.task_of_path(item.path)
        following = self.grading.spec.course.task_of_path(nextitem.path) if nextitem is not None else None
        if task is not None and following != task:
            self.grading.task_done(task, following, stopping=bool(item.session.shouldstop))
        return result

    def pytest_sessionfinish(self, session):
        if self.grading.spec.score_report:
            write_report(self.grading.build_report(), self.grading.spec.score_report)

    def pytest_terminal_summary(self, terminalreporter):
        if not self.grading.results:
            return
        terminalreporter.section("score")
        for line, problem in score_lines(self.grading.build_report()):
            terminalreporter.write_line(line, red=problem)

    def pytest_unconfigure(self):
        self.grading.close()


def pytest_collection_modifyitems(config, items):
    """Long visible checks (a convergence run at home) run only when asked for with --long;
    left out otherwise, they are deselected, so no report counts their points. Under
    --stop-on-concept the concept's tests run first (in their order), so a session that stops
    at the concept's first failure runs little else: the verdict is the one the whole suite's
    order would reach, at a fraction of its time."""
    concept = config.stash[_SESSION].spec.stop_on_concept
    if concept:
        concept_first(items, concept)
    if config.getoption("long"):
        return
    long = [item for item in items if metadata.of_item(item).long]
    if long:
        config.hook.pytest_deselected(items=long)
        items[:] = [item for item in items if not metadata.of_item(item).long]


def concept_first(items: list, concept: str, cost=lambda item: 0.0) -> None:
    """The concept's tests first (every test, for ANY_CONCEPT), the cheapest first by `cost(item)`,
    each group otherwise in its order."""
    items.sort(key=lambda item: (concept != ANY_CONCEPT and metadata.of_item(item).concept != concept, cost(item)))


def pytest_runtest_setup(item):
    meta = metadata.of_item(item)
    if meta.lacks_gpus():
        pytest.skip(NO_GPU.feedback)
    if meta.distributed and item.config.stash[_SESSION].spec.isolation["level"] == "uid":
        pytest.skip(NO_SOCKETS.feedback)


def pytest_sessionfinish(session):
    """hypothesis's pytest plugin imports all of hypothesis for its end-of-session summary
    (about a second on two cores), even in a session where no test used it, such as a visible
    suite; such a session has nothing for it to summarise, so it steps aside."""
    if "hypothesis" not in sys.modules:
        session.config.pluginmanager.unregister(name="hypothesispytest")


# ---------------------------------------------------------------- fixtures

@pytest.fixture
def submission(request):
    """The learner's module for the task this test file belongs to (see grader.session.submission)."""
    __tracebackhide__ = True    # a module that does not import shows the learner's line, not this fixture
    grading = request.config.stash[_SESSION]
    task = grading.spec.course.task_of_path(request.path)
    if task is None:
        raise pytest.UsageError(f"{request.node.nodeid} uses `submission` outside a task folder")
    backend = grading.backend_for(task)
    deadline = time.monotonic() + _test_timeout(request.node) - CALL_MARGIN_S
    mark = backend.output_mark()
    backend.start(deadline)
    request.node.stash[_SUBMISSION] = submission = Submission(backend, deadline)
    yield submission
    request.node.stash[_OUTPUT] = backend.output_since(mark)


@pytest.fixture
def artifacts(request) -> dict:
    """A dict the test fills with data that the report's formats show beside its result (a loss
    curve, a step breakdown): the learner's own results and public references only, never a
    hidden input or an expected value. Filled before the test's asserts, it is kept when the
    test fails, which is when the learner needs it most."""
    return request.node.stash.setdefault(_ARTIFACTS, {})


@pytest.fixture
def seed(request) -> int:
    """The run's seed (`--grader-seed`), recorded in the score report."""
    return request.config.stash[_SESSION].spec.seed


@pytest.fixture
def rng(request, seed) -> np.random.Generator:
    """A NumPy generator seeded by the run's seed and the test's id: reproducible per test."""
    digest = hashlib.sha256(f"{seed}:{request.node.nodeid}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _test_timeout(item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and (marker.args or "timeout" in marker.kwargs):
        value = marker.args[0] if marker.args else marker.kwargs["timeout"]
    else:
        value = item.config.getoption("timeout", None) or item.config.getini("timeout")
    value = float(value or 0)
    return value if value > 0 else 24 * 3600.0
