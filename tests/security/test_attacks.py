"""Every attack of `attacks.py` graded in one batch through the real CLI (`--jobs 2`), among
honest submissions, and each given the honest outcome; around the batch: the course tree is
unchanged, no process or cgroup of it survives, no connection reached the host, the trusted
processes stayed small and the gradebook lists everyone."""
import csv
import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grader.course import COURSE
from grader.schema.report import ReportError, ScoreReport, read_report
from grader.worker.loading import sibling_module

attacks = sibling_module(__file__, "attacks")
harness = sibling_module(__file__, "harness")

pytestmark = [pytest.mark.timeout(3600)]

BATCH_LIMIT_S = 3000
POOL_PEAK_LIMIT_MB = 1500      # a pool process grading exercise 01 peaks near 400 MB; a reply it cannot
                               # refuse before reading it (two 1 GiB blobs) took it to 3.4 GB
FIRST = ("reference_first", "stub_first")
# read_neighbour beside reference_first; then long-lived effects, so that they overlap everything
EARLY = ("read_neighbour", "daemons", "sigstop_self", "leave_behind")
AFTER_ATTACKS = ("find_leftovers",)     # graded once every attack has been, by a pool process that graded some
LAST = ("honest_loops", "honest_git_clone", "reference_last", "stub_last")


@dataclass
class Batch:
    context: object
    cli: object
    paths: dict                                          # submission -> the path given to the CLI
    git_head: str                                        # the honest clone's commit
    level: str = "sandbox"                               # the isolation level it was graded at
    graded: dict = field(default_factory=dict)          # submission -> attacks.Graded
    summary: dict = field(default_factory=dict)          # submission's path -> its row of summary.csv
    course_changes: list = field(default_factory=list)
    device_changes: list = field(default_factory=list)   # of the host's device nodes
    bystander_changes: list = field(default_factory=list)
    survivors: dict = field(default_factory=dict)        # processes of the batch alive after it
    marked: dict = field(default_factory=dict)           # processes an attack started, alive after it
    cgroups: list = field(default_factory=list)
    leftovers: list = field(default_factory=list)
    rewritten: list = field(default_factory=list)
    connections: list = field(default_factory=list)
    peak_mb: dict = field(default_factory=dict)          # trusted process -> its peak memory


# The default tier attacks the sandbox with one attack per trust mechanism; the full tier (--full)
# grades every attack at every level (the uid level's own mechanisms are attacked in the default
# tier by tests/security/test_no_namespaces.py).
DEFAULT_TIER_LEVELS = ("sandbox",)
DEFAULT_TIER_ATTACKS = (
    "import_os_exit", "kill_everything", "sigstop_self", "daemons",                  # processes and signals
    "memory_bomb", "fork_bomb", "output_flood", "wire_flood", "scratch_fill",           # resources, trusted memory
    "hostile_values", "hostile_exceptions", "network", "nested_namespaces",              # values, network, namespaces
    "write_course", "write_outputs", "write_other_learners", "read_hidden", "read_solutions",   # files
    "symlink_to_reference", "zip_slip", "forge_dispatcher", "leave_behind", "find_leftovers")   # intake, forgery, leftovers


@pytest.fixture(scope="module", params=[pytest.param(level, marks=[] if level in DEFAULT_TIER_LEVELS else [pytest.mark.full])
                                        for level in harness.LEVELS], ids=list(harness.LEVELS))
def batch(request) -> Batch:
    """The batch graded at each isolation level: in the sandbox, and at the uid level where no
    namespace can be made (a real seccomp filter, as a platform's container has)."""
    level = request.param
    why_not = harness.level_skip_reason(level)
    if why_not:
        pytest.skip(why_not)
    work = harness.work_folder(f"security-{level}")     # it holds what the workers (of another uid) must reach
    request.addfinalizer(lambda: shutil.rmtree(work, ignore_errors=True))
    subs, out_dir = work / "subs", work / "out"
    marker, secret = harness.new_marker(), secrets.token_hex(16)
    listener = harness.Listener(marker)
    honest = attacks.bystanders(subs)
    clone, head = attacks.git_clone(subs / "honest_git_clone")
    context = attacks.Context(course=COURSE.root, out_dir=out_dir, work=work, marker=marker, secret=secret,
                              port=listener.port, abstract_socket=marker, host_addresses=harness.host_addresses(),
                              bystanders={**honest, "honest_git_clone": clone})
    every_attack = request.config.getoption("--full")
    made = {a.name: a.make(subs, context) for a in attacks.ATTACKS
            if level in a.levels and (every_attack or a.name in DEFAULT_TIER_ATTACKS)}
    paths = {**honest, "honest_git_clone": clone, **made}
    order = [*FIRST, *(n for n in EARLY if n in made), *(n for n in made if n not in EARLY + AFTER_ATTACKS),
             *(n for n in AFTER_ATTACKS if n in made), *LAST]

    course_before, devices_before = harness.course_fingerprint(), harness.device_fingerprint()
    bystanders_before = _bystander_files(subs)
    # required: a batch of attacks must never be graded unprotected (at `none`, as root, kill(-1) is everyone's)
    args = ["grade", *(paths[n] for n in order), "--tasks", "01", "--jobs", "2", "--out-dir", out_dir,
            "--isolation", "required"]
    with harness.Watch(work / "tmp") as watch:
        cli = harness.run_cli(args, harness.grading_env(work, GRADER_SECURITY_SECRET=secret), cwd=work,
                              timeout_s=BATCH_LIMIT_S, level=level)
    result = Batch(context=context, cli=cli, paths=paths, git_head=head, peak_mb=dict(watch.peak_mb), level=level)
    result.survivors = watch.survivors()
    result.rewritten = _rewritten_while_waiting(out_dir, seconds=3)   # what a surviving daemon would do
    result.marked = harness.processes_with(marker)
    result.cgroups = harness.leftover_cgroups(watch.jails)
    result.leftovers = sorted(str(p) for p in (work / "tmp").glob("grader-*"))
    result.connections = list(listener.connections)
    listener.close()
    result.course_changes = harness.differences(course_before, harness.course_fingerprint())
    result.device_changes = harness.differences(devices_before, harness.device_fingerprint())
    result.bystander_changes = harness.differences(bystanders_before, _bystander_files(subs))
    result.summary = _summary(out_dir)
    result.graded = _graded(out_dir, paths, result.summary, context)
    peak_mb = max(result.peak_mb.values(), default=0)
    slowest = sorted(((one.report.run or {}).get("duration_s") or 0, name) for name, one in result.graded.items())[-5:]
    harness.show(request, f"attack batch at the {level} level: {len(paths)} submissions ({len(made)} attacks), task 01, "
                          f"--jobs 2: {cli.wall_s:.0f} s wall, peak trusted process {peak_mb:.0f} MB; slowest: "
                          + ", ".join(f"{name} {seconds:.0f} s" for seconds, name in reversed(slowest)))
    return result


def _bystander_files(subs: Path) -> dict:
    return harness.fingerprint(subs / "reference_last") | harness.fingerprint(subs / "stub_last")


def _rewritten_while_waiting(out_dir: Path, seconds: float) -> list[str]:
    files = [*out_dir.rglob("score_report.json"), out_dir / "summary.csv"]
    before = {p: p.read_bytes() for p in files if p.exists()}
    time.sleep(seconds)
    return [str(p) for p, data in before.items() if not p.exists() or p.read_bytes() != data]


def _summary(out_dir: Path) -> dict:
    if not (out_dir / "summary.csv").exists():
        return {}
    with open(out_dir / "summary.csv", newline="", encoding="utf-8") as f:
        return {row["path"]: row for row in csv.DictReader(f)}


def _graded(out_dir: Path, paths: dict, summary: dict, context) -> dict:
    """Each submission's report and worker log, found through the gradebook (a submission's
    output folder need not have its name)."""
    graded = {}
    for name, path in paths.items():
        row = summary.get(str(path))
        folder = out_dir / (row["submission"] if row else name)
        try:
            report = read_report(folder / "score_report.json")
        except ReportError as exc:
            report = ScoreReport.failed(f"the attack suite found no report: {exc}")
        log = folder / "logs" / f"{attacks.TASK}.log"
        graded[name] = attacks.Graded(name, report, log.read_text(errors="replace") if log.exists() else "", context)
    for one in graded.values():
        one.batch = graded
    return graded


@pytest.mark.parametrize("attack", [pytest.param(a, marks=[] if a.name in DEFAULT_TIER_ATTACKS else [pytest.mark.full])
                                    for a in attacks.ATTACKS], ids=[attack.name for attack in attacks.ATTACKS])
def test_attack_gets_the_honest_outcome(batch, attack):
    if batch.level not in attack.levels:
        pytest.skip(f"{attack.name} is graded in the sandbox's batch only: {attack.why_sandbox_only}")
    graded = batch.graded[attack.name]
    assert graded.report.isolation.get("level") == batch.level, graded.report.isolation
    attack.check(graded)


def test_honest_submissions_score_as_if_graded_alone(batch):
    for name in ("reference_first", "reference_last", "honest_git_clone"):
        report = batch.graded[name].report
        assert report.complete and report.total.percent == 100.0, (name, report.total, report.problems)
        module = report.task(attacks.TASK).module
        assert "identical to the course's reference solution" in " ".join(module.flags), (name, module)
    for name in ("stub_first", "stub_last"):
        attacks.as_stub(batch.graded[name])
        assert batch.graded[name].report.complete
    lost = sorted({attacks.test_name(t) for t in batch.graded["honest_loops"].tests if t.lost})
    assert lost == sorted(attacks.STRUCTURAL_TESTS), f"the loop-and-matmul module lost {lost}"
    assert batch.graded["honest_git_clone"].report.submission["commit"] == batch.git_head


def test_course_tree_is_unchanged(batch):
    assert not batch.course_changes, "the course changed during the batch:\n" + "\n".join(batch.course_changes[:30])


def test_host_devices_are_unchanged(batch):
    assert not batch.device_changes, "the host's device nodes changed during the batch:\n" + \
        "\n".join(batch.device_changes)


def test_other_learners_files_are_unchanged(batch):
    assert not batch.bystander_changes, "\n".join(batch.bystander_changes)


def test_nothing_outlives_the_batch(batch):
    assert not batch.survivors, f"processes of the batch alive after it ended: {batch.survivors}"
    assert not batch.marked, f"processes started by attacks still alive: {batch.marked}"
    assert not batch.cgroups, f"cgroups of the batch's jails left behind: {batch.cgroups}"
    assert not batch.leftovers, f"temporary folders left behind: {batch.leftovers}"


def test_reports_are_not_rewritten_after_the_batch(batch):
    assert not batch.rewritten, f"rewritten after the CLI returned: {batch.rewritten}"


def test_no_connection_reaches_the_host(batch):
    assert not batch.connections, batch.connections


def test_the_gradebook_lists_every_submission(batch):
    assert "Traceback" not in batch.cli.output, batch.cli.output[-3000:]
    incomplete = [name for name, graded in batch.graded.items() if not graded.report.complete]
    assert batch.cli.returncode == (3 if incomplete else 0), \
        f"exit {batch.cli.returncode} (3: some reports record problems: {incomplete})\n" + batch.cli.output[-2000:]
    assert len(batch.summary) == len(batch.graded), sorted(batch.summary)
    for name, graded in batch.graded.items():
        row = batch.summary[str(batch.paths[name])]
        assert float(row["points"]) == graded.report.total.points, (name, row)
        # a status reads "complete" or, say, "complete; 1 test(s) ran out of memory"
        assert row["status"].startswith("complete") == graded.report.complete, (name, row)
    beside = [p for p in batch.context.out_dir.parent.rglob("score_report.json")
              if not p.is_relative_to(batch.context.out_dir)]
    assert not beside, f"reports written outside the output folder: {beside}"


def test_trusted_processes_stay_small(batch):
    pools = {k: v for k, v in batch.peak_mb.items() if "grader.running.pool" in k}
    assert pools, "no pool process was observed"
    too_big = {k: round(v) for k, v in pools.items() if v > POOL_PEAK_LIMIT_MB}
    assert not too_big, f"trusted processes over {POOL_PEAK_LIMIT_MB} MB: {too_big}"
