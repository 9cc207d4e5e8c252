"""A worker that outlives its calls must not be able to race the tests: exercise 02's tests write
their inputs into pytest's temporary folder, which the worker shares, so a thread of the learner's
that plants a link where a test is about to write would have the grader (the host's user) write
through it, anywhere. The link here points into the course root and beside the suite's folders.

The links are planted by a thread of the worker; by a thread of a child whose first thread has
exited (such a process reads as a zombie, "Z", in `/proc/<pid>/stat` while its other threads run
on); by a thread of exercise 03's module, which must not run while exercise 02's tests do; or by
a daemon that exercise 01's module leaves behind before its import fails.
(Links left by a call itself, within the rules of the pause, are the backend tests' concern.)"""
import pytest

from grader.course import COURSE, locate_module
from grader.schema.report import read_report
from grader.worker.loading import sibling_module

attacks = sibling_module(__file__, "attacks")
harness = sibling_module(__file__, "harness")

pytestmark = [pytest.mark.skipif(harness.sandbox_skip_reason() is not None, reason=str(harness.sandbox_skip_reason())),
              pytest.mark.timeout(1800)]

PLANTER = '''
import threading, time
_TARGETS = {"train.jsonl": CONTEXT["canaries"][0], "eval.jsonl": CONTEXT["canaries"][1],
            "log.jsonl": CONTEXT["canaries"][0], "model": CONTEXT["canaries"][1]}

def _plant():
    """Links in every folder of the shared folder, where none is yet (again where one was removed)."""
    for folder, dirs, files in _os.walk(scratch_dir()):
        for name, target in _TARGETS.items():
            try:
                _os.symlink(target, _os.path.join(folder, name))
                observe("planted a link", _os.path.join(folder, name))
            except OSError:
                pass

def _plant_forever():
    while True:
        _plant()
        time.sleep(0.0005)

threading.Thread(target=_plant_forever, daemon=True).start()
'''

ZOMBIE_LEADER_PLANTER = PLANTER.replace("threading.Thread(target=_plant_forever, daemon=True).start()", '''
import ctypes, platform
if once("zombie-leader"):
    _up_r, _up_w = _os.pipe()
    if _os.fork() == 0:
        _plant()                          # once, and said so, before the worker goes on
        threading.Thread(target=_plant_forever).start()
        _os.write(_up_w, b"up")
        # exit(2) of this thread alone, not exit_group: the process lives on as "Z"
        ctypes.CDLL(None).syscall({"x86_64": 60, "aarch64": 93}[platform.machine()], 0)
    _os.close(_up_w)
    _os.read(_up_r, 2)
''')

# A daemon left behind by a module whose import fails: the worker is killed, the jail lives on.
DAEMON_AFTER_A_FAILED_IMPORT = PLANTER.replace("threading.Thread(target=_plant_forever, daemon=True).start()", '''
_up_r, _up_w = _os.pipe()
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        _plant()                          # once, and said so, before the import fails
        _os.write(_up_w, b"up")
        _os.closerange(3, 1 << 16)        # the worker's channel closes with the worker: it looks gone
        _plant_forever()
    _os._exit(0)
_os.close(_up_w)
_os.read(_up_r, 2)
raise ImportError("this module never imports")
''')

# (the exercise whose module holds the planter, the planter): exercise 02's own; exercise 03's,
# graded in the same session after 02, whose sandbox starts when the session does; or exercise
# 01's, graded before 02, whose import fails.
PLANTERS = {"thread": ("02", PLANTER), "zombie_leader": ("02", ZOMBIE_LEADER_PLANTER), "other_task": ("03", PLANTER),
            "failed_import": ("01", DAEMON_AFTER_A_FAILED_IMPORT)}


def stub(name: str) -> str:
    return locate_module(COURSE.exercises, COURSE.task_named(name)).read_text(encoding="utf-8")


# The default tier plants one link; the full tier (--full) every way of planting one.
DEFAULT_TIER_PLANTERS = ("failed_import",)


@pytest.mark.parametrize("planter", [pytest.param(name, marks=[] if name in DEFAULT_TIER_PLANTERS else [pytest.mark.full])
                                     for name in PLANTERS])
def test_a_planted_link_never_redirects_a_tests_write(tmp_path, planter):
    marker = harness.new_marker()
    canaries = [COURSE.root / f".{marker}-canary", tmp_path / f"{marker}-canary"]
    context = attacks.Context(course=COURSE.root, out_dir=tmp_path / "out", work=tmp_path, marker=marker, secret="",
                              port=0, abstract_socket=marker, host_addresses=[], bystanders={},
                              canaries=tuple(str(c) for c in canaries))
    planted_in, planter_code = PLANTERS[planter]
    modules = {name: stub(name) for name in ("02", planted_in)}
    modules[planted_in] = attacks.hostile.prelude(context) + planter_code + modules[planted_in]
    attacks.course_layout(tmp_path / "planter", modules)

    before = harness.course_fingerprint()
    try:
        tasks = sorted({"02", planted_in})
        cli = harness.run_cli(["grade", tmp_path / "planter", "--tasks", *tasks, "--out-dir", tmp_path / "out"],
                              harness.grading_env(tmp_path), cwd=tmp_path, timeout_s=1500)
        written = [str(c) for c in canaries if c.exists() or c.is_symlink()]
        changes = harness.differences(before, harness.course_fingerprint())
    finally:
        for canary in canaries:
            canary.unlink(missing_ok=True)
    report = read_report(tmp_path / "out" / "planter" / "score_report.json")
    log = (tmp_path / "out" / "planter" / "logs" / f"{COURSE.task_named(planted_in).name}.log").read_text(errors="replace")
    assert "planted a link" in log, "the attack never planted a link: it proves nothing\n" + log[-2000:]
    assert not written, f"a test wrote through a link the learner planted: {written}"
    assert not changes, changes[:20]
    assert cli.returncode in (0, 3), cli.output[-2000:]
    assert report.total.points == 0, f"a stub with a planting thread earned {report.total.points} points"
