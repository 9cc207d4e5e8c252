"""The attack catalogue: one malicious submission per attack class, each with the honest outcome
it must get.

Most attacks are the exercise-01 stub plus an attack (the learner's side is in `hostile.py`), so
they must score 0; an attack built on a working module must score exactly what the same module
scores without it. Each attack's check reads its report and what the attack observed from inside
(its worker's log): an attempt that says it succeeded, or an effect that shows anywhere, is a hole.
Some attempts reach folders of the jail's own (a host path under /tmp names a folder of the jail's
private /tmp): those attacks are judged by their effect on the host's files instead.

Checks that hold for every attack (course tree unchanged, no process survives, bystanders graded
as if alone, the gradebook whole) live in test_attacks.py.
"""
from __future__ import annotations

import io
import json
import re
import stat
import subprocess
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import COURSE, locate_module
from grader.schema.report import ScoreReport
from grader.session import submission
from grader.worker.loading import sibling_module

hostile = sibling_module(__file__, "hostile")
harness = sibling_module(__file__, "harness")
TASK, STUB, REFERENCE = hostile.TASK, hostile.STUB, hostile.REFERENCE
STRUCTURAL_TESTS = ("test_einsum_and_no_loops_over_batch_or_heads",         # visible
                    "test_scores_are_computed_with_einsum", "test_no_python_loops_over_batch_or_heads")


def test_name(test) -> str:
    """A test's function name, without its parameters."""
    return test.id.split("::")[-1].split("[")[0]


@dataclass(frozen=True)
class Context:
    """What every attack is told: the strongest attacker knows all of it."""
    course: Path
    out_dir: Path
    work: Path                       # the suite's own folder: submissions, copies, canaries
    marker: str                      # in the command line of every process an attack starts
    secret: str                      # in the grader's environment: must never reach learner code
    port: int                        # a host listener on every address
    abstract_socket: str
    host_addresses: list[str]
    bystanders: dict[str, Path]      # honest submissions of the same batch
    canaries: tuple[str, ...] = ()   # files that must never come to exist

    def as_json(self) -> str:
        return json.dumps({"course": str(self.course), "out_dir": str(self.out_dir), "work": str(self.work),
                           "marker": self.marker, "port": self.port, "abstract_socket": self.abstract_socket,
                           "host_addresses": self.host_addresses, "canaries": list(self.canaries),
                           "bystanders": {k: str(v) for k, v in self.bystanders.items()}})


@dataclass
class Graded:
    """One submission of the batch after grading: its report and its worker's log."""
    name: str
    report: ScoreReport
    log: str
    context: Context
    batch: dict[str, Graded] = field(default_factory=dict)

    @property
    def observed(self) -> list[tuple[str, str]]:
        found = []
        for line in self.log.splitlines():
            if line.startswith("ATTACK-OBSERVED "):
                try:
                    entry = json.loads(line.removeprefix("ATTACK-OBSERVED "))
                    found.append((entry["what"], entry["value"]))
                except (ValueError, KeyError):
                    pass
        return found

    @property
    def tests(self):
        return self.report.tests()

    def text(self) -> str:
        """Everything the learner's report says, as one string."""
        return json.dumps(self.report.to_json(), ensure_ascii=False)


@dataclass(frozen=True)
class Attack:
    name: str
    tries: str                                            # what the hostile learner tries, one line
    check: Callable[[Graded], None]
    module: Callable[[Context], str] | None = None        # attention.py of a course-layout submission
    build: Callable[[Path, Context], Path] | None = None   # or: makes the submission, returns its path
    levels: tuple[str, ...] = ("sandbox", "uid")          # the isolation levels whose promises it tests
    why_sandbox_only: str = ""                            # for an attack on the sandbox's promises alone

    def make(self, folder: Path, context: Context) -> Path:
        if self.build is not None:
            return self.build(folder / self.name, context)
        path = folder / self.name / TASK / "attention.py"
        path.parent.mkdir(parents=True)
        path.write_text(self.module(context), encoding="utf-8")
        return folder / self.name


# ---------------------------------------------------------------- the honest outcomes

def scores_nothing(graded: Graded, statuses=("failed", "error", "crashed", "timeout")) -> None:
    """A stub with an attack: 0 points, every graded test lost with a status in `statuses` and a
    reason a person can read."""
    report = graded.report
    assert report.tasks and report.task(TASK) is not None, f"{graded.name}: no result for {TASK}: {report.problems}"
    assert report.total.points == 0, f"{graded.name} earned {report.total.points} points: " + \
        ", ".join(t.id.split("::")[-1] for t in graded.tests if t.status == "passed")
    for test in graded.tests:
        if not test.graded:
            continue
        assert test.status in statuses, f"{graded.name}: {test.id} is {test.status!r}, expected one of {statuses}"
        assert test.feedback.strip(), f"{graded.name}: {test.id} lost its points without a reason"


def as_stub(graded: Graded) -> None:
    """The attack changed nothing: every function is still the stub's (not implemented)."""
    scores_nothing(graded, statuses=("failed",))
    for test in graded.tests:
        if test.graded and test_name(test) not in STRUCTURAL_TESTS:
            assert "not implemented" in test.feedback, f"{graded.name}: {test.id}: {test.feedback!r}"


def _lost_as(*statuses):
    return lambda graded: scores_nothing(graded, statuses=statuses)


def _complete(graded: Graded) -> None:
    """The grading is complete: nothing the learner's code did was taken for the course's fault."""
    assert graded.report.complete and not graded.report.problems, f"{graded.name}: {graded.report.problems}"


def refused_everything(graded: Graded, prefix: str = "") -> None:
    """Every attempt whose description starts with `prefix` was refused, and there was one."""
    attempts = [(what, value) for what, value in graded.observed if what.startswith(prefix)]
    assert attempts, f"{graded.name}: the attack never ran (nothing observed in its log)"
    succeeded = [f"{what}: {value}" for what, value in attempts if not value.startswith("refused")]
    assert not succeeded, f"{graded.name}: attempts that succeeded:\n" + "\n".join(succeeded)


def feedback_says(graded: Graded, *phrases: str, statuses=None) -> None:
    """Every graded test (of `statuses`, if given) lost with feedback that holds each phrase."""
    tests = [t for t in graded.tests if t.graded and (statuses is None or t.status in statuses)]
    assert tests, f"{graded.name}: no test with status in {statuses}: {[t.status for t in graded.tests]}"
    for test in tests:
        for phrase in phrases:
            assert phrase in test.feedback, \
                f"{graded.name}: {test.id} ({test.status}): {test.feedback!r} lacks {phrase!r}"


def some_feedback_says(graded: Graded, phrase: str, status: str | None = None) -> None:
    hits = [t for t in graded.tests if phrase in t.feedback and (status is None or t.status == status)]
    assert hits, f"{graded.name}: no {status or ''} test says {phrase!r}: " + \
        "; ".join(f"{t.status}: {t.feedback[:120]!r}" for t in graded.tests[:6])


def _attempted(what: str):
    def check(graded: Graded) -> None:
        assert any(seen == what for seen, _ in graded.observed), f"{graded.name}: the attack never tried {what!r}"
    return check


def all_of(*checks):
    def check(graded: Graded) -> None:
        for one in checks:
            one(graded)
    return check


def same_outcome_as(honest: str):
    """An attack on a working module gains nothing: test by test, it scores what `honest` (the
    same module without the attack, graded in the same batch) scores."""
    def check(graded: Graded) -> None:
        mine = {t.id: t.status for t in graded.tests}
        theirs = {t.id: t.status for t in graded.batch[honest].tests}
        gained = sorted(i.split("::")[-1] for i in mine if mine[i] == "passed" and theirs.get(i) != "passed")
        assert not gained, f"{graded.name} gained {gained} over {honest} ({graded.report.total.points} vs " \
                           f"{graded.batch[honest].report.total.points} points)"
        assert graded.report.total.points == graded.batch[honest].report.total.points
    return check


# ---------------------------------------------------------------- submissions built by hand

def course_layout(folder: Path, modules: dict[str, str]) -> Path:
    """A submission in the course layout: for each task (as `COURSE.task_named` takes it) its module's
    source, at `folder/NN_name/<module>.py`."""
    for name, source in modules.items():
        task = COURSE.task_named(name)
        path = folder / task.name / f"{task.module}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return folder


def grade_stub_with(work: Path, task: str, addition: str) -> Path:
    """Grade the course's stub of `task` with `addition` appended, as the one submission
    `work/learner`; the output folder (`learner/score_report.json`, the workers' logs)."""
    stub = locate_module(COURSE.exercises, COURSE.task_named(task)).read_text(encoding="utf-8")
    course_layout(work / "learner", {task: stub + addition})
    cli = harness.run_cli(["grade", work / "learner", "--tasks", task, "--out-dir", work / "out"],
                          harness.grading_env(work), cwd=work, timeout_s=800)
    assert cli.returncode in (0, 1), cli.output[-2000:]
    return work / "out"


def symlink_module(target: Callable[[Context], Path]):
    def build(folder: Path, context: Context) -> Path:
        module = folder / TASK / "attention.py"
        module.parent.mkdir(parents=True)
        module.symlink_to(target(context))
        return folder
    return build


def outside_copy(context: Context) -> Path:
    copy = context.work / "outside" / "attention.py"
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(REFERENCE, encoding="utf-8")
    return copy


def symlinked_task_folder(folder: Path, context: Context) -> Path:
    folder.mkdir(parents=True)
    (folder / TASK).symlink_to(COURSE.solutions / TASK, target_is_directory=True)
    return folder


def git_dir_link(folder: Path, context: Context) -> Path:
    """`.git` is a link to the course root, so that the git folder bound beside the module
    would be the whole course, solutions included."""
    course_layout(folder, {TASK: hostile.at_import("", STUB)(context) + "\n" + hostile.GIT_LINK_DELEGATE})
    (folder / ".git").symlink_to(context.course, target_is_directory=True)
    return folder


def _zip_entry(name: str, data: bytes, mode: int = 0o100644) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.external_attr = mode << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info, data


def zip_slip(folder: Path, context: Context) -> Path:
    escape = context.work / "zip_escapes"
    entries = [
        _zip_entry("../zip_slip_escape.py", b"X = 1\n"),
        _zip_entry("../../zip_slip_escape2.py", b"X = 2\n"),
        _zip_entry(str(escape / "absolute.py"), b"X = 3\n"),
        _zip_entry(f"{TASK}/../../../zip_slip_escape3.py", b"X = 4\n"),
        _zip_entry("C:/zip_slip_escape4.py", b"X = 5\n"),
        _zip_entry(f"{TASK}/attention.py", str(COURSE.solutions / TASK / "attention.py").encode(), mode=stat.S_IFLNK | 0o777),
        _zip_entry(f"{TASK}/linked_dir", str(context.course).encode(), mode=stat.S_IFLNK | 0o777),
        _zip_entry(f"{TASK}/notes.txt", b"an ordinary file\n"),
    ]
    return _write_zip(folder.with_suffix(".zip"), entries)


def zip_bomb(folder: Path, context: Context) -> Path:
    return _write_zip(folder.with_suffix(".zip"), [_zip_entry(f"{TASK}/attention.py", b"#" * (200 << 20))])


def dotdot_zip(folder: Path, context: Context) -> Path:
    """An upload named `...zip`: its name, not its content, is the attack (`..` as a folder name)."""
    folder.mkdir(parents=True)
    return _write_zip(folder / "...zip", [_zip_entry(f"{TASK}/attention.py", STUB.encode())])


def gradebook_name(folder: Path, context: Context) -> Path:
    """A submission folder named like the batch's gradebook."""
    folder.mkdir(parents=True)
    return course_layout(folder / "summary.csv", {TASK: STUB})


def _write_zip(path: Path, entries) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for info, data in entries:
            bundle.writestr(info, data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())
    return path


def huge_module(folder: Path, context: Context) -> Path:
    return course_layout(folder, {TASK: STUB + "\n" + ("# padding " * 100 + "\n") * 5300})


# ---------------------------------------------------------------- checks of single attacks

def _no_file_escaped(graded: Graded) -> None:
    context = graded.context
    escaped = [str(p) for p in (context.work / "zip_escapes").glob("*")] + \
        [str(p) for base in (context.work, context.work / "tmp", context.work.parent, context.out_dir)
         for p in base.glob("zip_slip_escape*")]
    assert not escaped, f"files written outside the archive's folder: {escaped}"


def _zip_refusals(graded: Graded) -> None:
    problems = " | ".join(graded.report.problems)
    for name in ("../zip_slip_escape.py", "../../zip_slip_escape2.py", "zip_slip_escape3.py", "C:/zip_slip_escape4.py",
                 f"{TASK}/attention.py", f"{TASK}/linked_dir", "absolute.py"):
        assert name in problems, f"the refusal of {name!r} is not in the report's problems: {problems}"


def _module_refused(*phrases: str):
    def check(graded: Graded) -> None:
        feedback_says(graded, *phrases, statuses=("error",))
        assert all(t.status == "error" for t in graded.tests if t.graded), {t.status for t in graded.tests}
    return check


def _log_at_most(limit: int):
    def check(graded: Graded) -> None:
        log = graded.context.out_dir / graded.name / "logs" / f"{TASK}.log"
        assert log.stat().st_size <= limit, f"the worker log grew to {log.stat().st_size:,} bytes"
        for test in graded.tests:
            assert len(test.output) <= 2100, f"{test.id} kept {len(test.output):,} characters of output"
    return check


def _hidden_source_absent(graded: Graded) -> None:
    hidden = (COURSE.hidden / TASK / "test_attention_hidden.py").read_text(encoding="utf-8")
    variants = (COURSE.hidden / TASK / "variants.py").read_text(encoding="utf-8")
    distinctive = [line.strip() for line in (hidden + variants).splitlines()
                   if len(line.strip()) > 50 and ("assert" in line or "Mutant(" in line)][:12]
    assert distinctive
    for text, where in ((graded.text(), "the report"), (graded.log, "the worker log")):
        leaked = [line for line in distinctive if line in text]
        assert not leaked, f"hidden source in {where}: {leaked[:2]}"


def _secret_absent(graded: Graded) -> None:
    for text, where in ((graded.text(), "the report"), (graded.log, "the worker log")):
        assert graded.context.secret not in text, f"the grader's environment reached the learner ({where})"


def _processes_kept_apart(graded: Graded) -> None:
    """In the sandbox the worker sees its jail's processes only. At the uid level (no pid
    namespace) it sees every pid and their command lines, as any user of a machine does, but the
    links and open files of none but its own host's processes (the zygote and its workers)."""
    line = next((row for row in graded.log.splitlines() if row.startswith("PROCESSES ")), None)
    assert line, "the attack printed no process list"
    seen = json.loads(line.removeprefix("PROCESSES "))
    course = str(graded.context.course)
    for pid, entry in seen.items():
        for key in ("cwd", "root"):
            assert not str(entry.get(key, "")).startswith(course), f"pid {pid}'s {key} is in the course: {entry}"
    if graded.report.run["config"]["isolation"] == "uid":
        opened = {pid: entry for pid, entry in seen.items()
                  if not all(str(entry[key]).startswith("refused") for key in ("cwd", "root", "exe", "fds"))}
        strangers = {pid: entry["cmdline"] for pid, entry in opened.items() if "grader.worker.zygote" not in entry["cmdline"]}
        assert not strangers, f"the worker read the links or open files of processes not its own: {strangers}"
        return
    assert len(seen) <= 3, f"the worker sees {len(seen)} processes: {sorted(seen)}"
    for entry in seen.values():
        assert "grader.running.pool" not in entry["cmdline"] and "grader.cli" not in entry["cmdline"], entry


def _environment_clean(graded: Graded) -> None:
    line = next((row for row in graded.log.splitlines() if row.startswith("ENVIRONMENTS ")), None)
    assert line, "the attack printed no environments"
    assert graded.context.secret not in line, "the grader's environment is visible to learner code"


def _no_delegation(graded: Graded) -> None:
    found = [value for what, value in graded.observed if what.startswith("SUCCEEDED: found")]
    assert not found, f"learner code found a solution file: {found}"


def _memory_limit(graded: Graded) -> None:
    limits = graded.report.isolation.get("limits", {})
    if "cgroup" in limits.get("memory_mb", ""):
        some_feedback_says(graded, "out of memory (limit", status="crashed")
    else:
        some_feedback_says(graded, "MemoryError")


def _bounded(what: str, within_mb: int):
    def check(graded: Graded) -> None:
        for observed_what, value in graded.observed:
            if observed_what.startswith(what):
                assert value.startswith("refused"), f"{observed_what}: {value}"
                found = re.search(r"after (\d+) MiB", value)
                assert found and int(found.group(1)) <= within_mb, f"{observed_what}: {value}"
                return
        raise AssertionError(f"{graded.name}: nothing observed for {what!r}")
    return check


def _count_refused_by(what: str, at_most: int):
    def check(graded: Graded) -> None:
        values = [v for w, v in graded.observed if w == what]
        assert values, f"{graded.name}: the kernel never refused ({[w for w, _ in graded.observed]})"
        assert int(values[0]) <= at_most, f"{what} {values[0]}"
    return check


def _outputs_intact(graded: Graded) -> None:
    out = graded.context.out_dir
    for path in (out / graded.name / "pytest.log", out / graded.name / "logs" / f"{TASK}.log", out / "summary.csv"):
        assert hostile.FORGED_REPORT not in path.read_text(encoding="utf-8", errors="replace"), f"{path} was forged"
    for report in out.glob("*/score_report.json"):
        assert "forged" not in json.loads(report.read_text(encoding="utf-8")), f"{report} was forged"


def _bystanders_intact(graded: Graded) -> None:
    for name, folder in graded.context.bystanders.items():
        assert not (folder / "conftest.py").exists(), f"a conftest.py was planted in {name}'s submission"
        for module in folder.rglob("attention.py"):
            honest = (REFERENCE, STUB, hostile.honest_loops())
            assert module.read_text(encoding="utf-8") in honest, f"{module} was changed"


def _cpu_share(graded: Graded) -> None:
    share = next((float(v) for w, v in graded.observed if w == "cores used by 8 busy processes"), None)
    assert share is not None, f"{graded.name}: the attack did not report"
    limits = graded.report.isolation.get("limits", {})
    if "cgroup" in limits.get("cpus", ""):
        allowed = float(limits["cpus"].split()[0])
        assert share <= allowed + 0.35, f"8 busy processes of one worker used {share} cores; the limit is {allowed}"


def _report_is_own(graded: Graded) -> None:
    assert graded.report.submission["path"].endswith(graded.name), graded.report.submission
    assert graded.report.complete, graded.report.problems


def _no_commit(graded: Graded) -> None:
    assert graded.report.submission.get("commit") is None, \
        f"the course's commit was taken as the submission's: {graded.report.submission}"


def _signals_only_inside(graded: Graded) -> None:
    """Of 70,000 pids, the kernel accepted signals only for processes in the attacker's sight and of its own uid."""
    seen = dict(graded.observed)
    assert "signals accepted by the kernel for" in seen, f"{graded.name}: the attack did not finish"
    for what in ("signals accepted for pids out of sight", "signals accepted for another uid's pids"):
        reached = [json.loads(value) for seen_what, value in graded.observed if seen_what == what]
        assert reached and not any(reached), f"{graded.name}: {what}: {reached}"


# ---------------------------------------------------------------- the catalogue

h = hostile
at_import, after_import, on_every_call = h.at_import, h.after_import, h.on_every_call


def _says(*phrases, statuses=None):
    return lambda graded: feedback_says(graded, *phrases, statuses=statuses)


def _some_say(phrase, status=None):
    return lambda graded: some_feedback_says(graded, phrase, status)


def _refused(prefix=""):
    return lambda graded: refused_everything(graded, prefix)


def _read_no_neighbour(graded: Graded) -> None:
    """Every read of a neighbour's module was refused. At the uid level every command line is
    visible, and the attack met at least one neighbour's zygote, so the refusals mean something;
    in the sandbox it sees none."""
    seen = [int(value) for what, value in graded.observed if what == "neighbour modules seen"]
    assert seen, f"{graded.name}: the attack never ran"
    read = [f"{what}: {value}" for what, value in graded.observed
            if what.startswith("read a neighbour's module") and not value.startswith("refused")]
    assert not read, f"{graded.name} read a neighbour's module:\n" + "\n".join(read)
    if graded.report.isolation.get("level") == "uid":
        assert seen[0] > 0, f"{graded.name}: no neighbour's zygote was running while it looked"


def _searched_and_found_nothing(graded: Graded) -> None:
    """Nothing an earlier submission left reaches a later one: the finder looked, and found none."""
    assert any(what == "searched" for what, _ in graded.observed), f"{graded.name}: the finder never ran"
    found = [value for what, value in graded.observed if what == "found"]
    assert not found, f"{graded.name} found what an earlier submission left: {found}"


def _host_started_again_at_most_once(graded: Graded) -> None:
    """A module that ends the processes running it (their host) costs one restart of them, not
    one per test: at the uid level kill(-1) ends its host, which is started again once."""
    ended = [t for t in graded.tests if "its sandbox ended" in t.feedback or "process running" in t.feedback]
    assert len(ended) <= submission.HOST_ENDINGS_ALLOWED, \
        f"{graded.name}: {len(ended)} tests ended with their host: " + "; ".join(t.feedback[:100] for t in ended[:3])


def _problem(phrase):
    def check(graded):
        assert any(phrase in p for p in graded.report.problems), f"{phrase!r} not in {graded.report.problems}"
    return check


# The worker's own process and its wire, and what the grader does with a submission before any worker
# starts, work alike at every isolation level: attacks on them alone are graded in the sandbox's batch.
SANDBOX_BATCH_ONLY = dict(levels=("sandbox",), why_sandbox_only="the worker's own process, its wire or the "
                          "grader's intake, which work alike at every level")

ATTACKS = [
    # process control
    Attack("import_sys_exit", "sys.exit while being imported", module=at_import(h.IMPORT_SYS_EXIT),
           check=all_of(scores_nothing, _says("could not be imported", "SystemExit")), **SANDBOX_BATCH_ONLY),
    Attack("import_os_exit", "os._exit while being imported", module=at_import(h.IMPORT_OS_EXIT),
           check=all_of(scores_nothing, _says("died", "exit code 0")), **SANDBOX_BATCH_ONLY),
    Attack("call_os_exit", "os._exit in the middle of a call", module=on_every_call(h.CALL_OS_EXIT),
           check=all_of(scores_nothing, _some_say("exit code 7", "crashed"))),
    Attack("kill_everything", "kill(-1, SIGKILL): every process it may signal", module=at_import(h.KILL_EVERYTHING),
           check=all_of(scores_nothing, _host_started_again_at_most_once)),   # the zygote dies, the worker lives on
    Attack("kill_everything_then_linger", "kill(-1, SIGKILL) while being imported, then a pause: the worker dies with "
           "its zygote before its import ends", module=at_import(h.KILL_EVERYTHING + "__import__('time').sleep(5)\n"),
           check=all_of(scores_nothing, _host_started_again_at_most_once)),
    Attack("signal_ancestors", "SIGSTOP, SIGTERM, SIGKILL to every ancestor, every pid in /proc and pids 1..70000",
           module=after_import(h.SIGNAL_ANCESTORS), check=all_of(scores_nothing, _signals_only_inside)),
    Attack("sigstop_self", "stops itself while being imported: a frozen worker", module=at_import(h.SIGSTOP_SELF),
           check=all_of(scores_nothing, _says("did not finish importing", statuses=("timeout",)))),
    Attack("fork_bomb", "a fork bomb whose children keep forking", module=after_import(h.FORK_BOMB),
           check=all_of(scores_nothing, _count_refused_by("fork refused after", 64))),
    Attack("memory_bomb", "10 GiB touched in one call", module=on_every_call(h.MEMORY_BOMB),
           check=all_of(scores_nothing, _memory_limit)),
    Attack("cpu_hog", "8 processes that keep every core busy while a call runs", module=on_every_call(h.CPU_HOG),
           check=all_of(as_stub, _cpu_share)),
    # output
    Attack("output_flood", "200 MiB printed at import and 256 KiB in every call", module=on_every_call(h.OUTPUT_FLOOD),
           check=all_of(as_stub, _log_at_most((1 << 20) + 200)), **SANDBOX_BATCH_ONLY),
    Attack("undecodable_output", "non-UTF-8 bytes, lone surrogates, NULs, escapes and markup in output and messages",
           module=on_every_call(h.UNDECODABLE), check=all_of(scores_nothing, _some_say("lone surrogates")),
           **SANDBOX_BATCH_ONLY),
    Attack("hostile_exceptions", "exceptions whose str() raises, is 50 MiB or no string; cycles; KeyboardInterrupt",
           module=on_every_call(h.HOSTILE_EXCEPTIONS), check=scores_nothing, **SANDBOX_BATCH_ONLY),
    Attack("hostile_values", "returns objects equal to anything, lying ndarray subclasses, 100000-deep lists",
           module=lambda context: h.prelude(context) + STUB + "\n" + h.HOSTILE_VALUES, check=scores_nothing,
           **SANDBOX_BATCH_ONLY),
    # network
    Attack("network", "connects to the host (127.0.0.1, ::1, its addresses, an abstract unix socket) and to the "
           "internet, resolves names, sends UDP", module=after_import(h.NETWORK_HOST + h.NETWORK_OUTSIDE),
           check=all_of(as_stub, refused_everything)),
    # writes
    Attack("write_course", "writes, truncates, renames, deletes course files; plants files in the course and "
           "site-packages; chmods, touches and opens for writing the executable and libraries of every process it "
           "sees, by path and through /proc", module=after_import(h.WRITE_COURSE),
           check=all_of(as_stub, refused_everything)),
    Attack("device_nodes", "chmods and touches every device node in /dev and every file its processes hold open "
           "(/proc/<pid>/fd), keeping mode and times: the host's must not notice (test_host_devices_are_unchanged)",
           module=after_import(h.DEVICE_NODES),
           check=all_of(as_stub, _attempted("chmod /dev/null"), _attempted("touch /dev/null"))),
    Attack("plant_pyc", "plants .pyc files in the grader's, the hidden suite's and numpy's __pycache__",
           module=after_import(h.PLANT_PYC), check=all_of(as_stub, _refused("plant"))),
    Attack("git_tricks", "git update-index --assume-unchanged, core.fsmonitor, hooks in the course's .git",
           module=after_import(h.GIT_TRICKS), check=all_of(as_stub, refused_everything)),
    Attack("write_outputs", "forges score_report.json, summary.csv and logs in the output folder",
           module=after_import(h.WRITE_OUTPUTS), check=all_of(as_stub, _outputs_intact, _report_is_own)),
    Attack("write_other_learners", "rewrites the other submissions of the batch",
           module=after_import(h.WRITE_OTHER_LEARNERS), check=all_of(as_stub, _bystanders_intact)),
    Attack("kernel_settings", "writes host-wide sysctls (core_pattern) through /proc/sys",
           module=after_import(h.KERNEL_SETTINGS), check=all_of(as_stub, refused_everything)),
    Attack("nested_namespaces", "a user namespace of its own to remount the jail read-write or mount a new /proc",
           module=after_import(h.NESTED_NAMESPACES), check=all_of(as_stub, refused_everything)),
    # reads
    Attack("read_solutions", "finds the reference through the course path, /proc/<parent>/cwd, /proc/*/root and a "
           "walk of the file system, then delegates to it", module=after_import(h.READ_SOLUTIONS),
           check=all_of(as_stub, _no_delegation, _refused("read "))),
    Attack("read_hidden", "reads the hidden suites and raises or prints them",
           module=after_import(h.READ_HIDDEN + h.CALL_HOOK),
           check=all_of(as_stub, _hidden_source_absent, refused_everything)),
    Attack("read_system", "reads /etc/shadow, keys, /proc/kcore, every environment it can see",
           module=after_import(h.READ_SYSTEM),
           check=all_of(as_stub, refused_everything, _environment_clean, _secret_absent)),
    Attack("proc_walk", "walks /proc: cwd, root, exe, cmdline and fds of every process",
           module=after_import(h.PROC_WALK),
           check=all_of(as_stub, _processes_kept_apart, _secret_absent, _refused("list"))),
    # submissions that are not what they seem
    Attack("symlink_to_reference", "the module is a link to the course's reference",
           build=symlink_module(lambda context: COURSE.solutions / TASK / "attention.py"),
           check=all_of(scores_nothing, _module_refused("link to a file outside the submission"))),
    Attack("symlink_outside", "the module is a link to a copy of the reference outside the submission",
           build=symlink_module(outside_copy),
           check=all_of(scores_nothing, _module_refused("link to a file outside the submission"))),
    Attack("symlinked_task_folder", "the task folder is a link to the course's solutions folder",
           build=symlinked_task_folder, check=all_of(scores_nothing, _module_refused("outside the submission"))),
    Attack("git_dir_link", "its .git is a link to the course root, which the worker would see as /submission/.git",
           build=git_dir_link, check=all_of(as_stub, _no_commit)),
    Attack("zip_slip", "a zip with ../, absolute and drive names and links to the reference", build=zip_slip,
           check=all_of(scores_nothing, _zip_refusals, _no_file_escaped), **SANDBOX_BATCH_ONLY),
    Attack("zip_bomb", "a zip whose module unpacks to 200 MiB", build=zip_bomb,
           check=all_of(scores_nothing, _some_say("was not found"), _problem("larger than 8 MiB")),
           **SANDBOX_BATCH_ONLY),
    Attack("huge_module", "a 5 MiB module", build=huge_module,
           check=all_of(scores_nothing, _module_refused("a module may be at most")), **SANDBOX_BATCH_ONLY),
    Attack("dotdot_zip", "an upload named `...zip`: `..` as its folder in the output", build=dotdot_zip, check=as_stub,
           **SANDBOX_BATCH_ONLY),
    Attack("gradebook_name", "a submission folder named summary.csv", build=gradebook_name, check=as_stub,
           **SANDBOX_BATCH_ONLY),
    # forging probes and reports
    Attack("structural_points_for_nothing", "a stub whose attention calls einsum once and returns None",
           module=after_import(h.STRUCTURAL_FOR_NOTHING), check=scores_nothing, **SANDBOX_BATCH_ONLY),
    Attack("forge_dispatcher", "replaces the worker's dispatcher: probes answer what the structural checks want",
           module=at_import(h.FORGE_DISPATCHER), check=as_stub, **SANDBOX_BATCH_ONLY),
    Attack("forge_probe_module", "plants a fake probes module in sys.modules",
           module=after_import(h.FORGE_PROBE_MODULE),
           check=all_of(_lost_as("failed"), _complete, _some_say("replaced or broke what it needs", "failed")),
           **SANDBOX_BATCH_ONLY),
    Attack("forge_monkeypatch", "a correct module with loops and no einsum, plus sys.settrace and numpy/torch patched",
           module=lambda context: h.prelude(context) + h.honest_loops() + "\n" + h.FORGE_MONKEYPATCH,
           check=same_outcome_as("honest_loops"), **SANDBOX_BATCH_ONLY),
    Attack("daemons", "setsid and double-fork daemons that rewrite reports after the worker ends",
           module=after_import(h.DAEMON), check=all_of(as_stub, _report_is_own)),
    # the grader's channels
    Attack("reply_pipe", "writes forged replies into every pipe it can open and prints into its reply channel",
           module=on_every_call(h.REPLY_PIPE), check=all_of(scores_nothing, _some_say("sent a broken", "crashed"))),
    Attack("wire_flood", "announces and sends two 1 GiB blobs straight into its reply channel",
           module=on_every_call(h.WIRE_FLOOD),
           check=all_of(scores_nothing, _some_say("over the size limit", "crashed")), **SANDBOX_BATCH_ONLY),
    # resources
    Attack("fd_exhaustion", "opens files until the limit and keeps them", module=after_import(h.FD_EXHAUSTION),
           check=all_of(scores_nothing, _count_refused_by("open files refused after", 1024))),
    Attack("tmp_exhaustion", "fills /tmp, /dev/shm, / and /dev", module=after_import(h.TMP_EXHAUSTION),
           check=all_of(as_stub, _bounded("fill /tmp", 512), _bounded("fill /dev/shm", 512),
                        _bounded("fill / ", 0), _bounded("fill /dev ", 0))),
    Attack("leave_behind", "leaves files named after the batch in every folder it may write, a usercustomize "
           "module and cache entries, for the next submission graded by the same pool process",
           module=after_import(h.LEAVE_BEHIND), check=all_of(as_stub, _attempted("plant in /tmp"))),
    Attack("find_leftovers", "a correct module that looks for what leave_behind left, graded after every attack",
           module=at_import(h.LEFTOVER_FINDER, REFERENCE), check=all_of(same_outcome_as("reference_last"),
                                                                        _searched_and_found_nothing)),
    Attack("read_neighbour", "a stub that reads the modules other zygotes name on their command lines, and "
           "becomes the first working one", module=lambda context: h.at_import(h.NEIGHBOUR_READER)(context) + "\n" +
           h.NEIGHBOUR_BORROWER,
           check=all_of(as_stub, _read_no_neighbour)),
    Attack("scratch_fill", "fills the scratch folder shared with the tests (the host's disk)",
           module=on_every_call(h.SCRATCH_FILL),
           check=all_of(scores_nothing, _some_say("in the folders it may write; the limit is", "crashed"))),
]


# ---------------------------------------------------------------- honest submissions in the same batch

def bystanders(folder: Path) -> dict[str, Path]:
    """Honest submissions graded in the same batch as the attacks (the first two before them,
    the rest after), each of which must score exactly what it scores alone."""
    return {name: course_layout(folder / name, {TASK: source}) for name, source in (
        ("reference_first", REFERENCE), ("stub_first", STUB), ("honest_loops", hostile.honest_loops()),
        ("reference_last", REFERENCE), ("stub_last", STUB))}


def git_clone(folder: Path, source: str = REFERENCE, message: str = "my attention") -> tuple[Path, str]:
    """A fork clone: `source` (the reference: an honest one) in `exercises/NN/`, committed in a git
    repository of its own; called again on the same folder, the next commit."""
    module = folder / "exercises" / TASK / "attention.py"
    module.parent.mkdir(parents=True, exist_ok=True)
    module.write_text(source, encoding="utf-8")
    git = ["git", "-C", str(folder), "-c", "user.name=learner", "-c", "user.email=learner@example.invalid"]
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", message], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return folder, head
