"""The two backends behind the `submission` fixture behave alike, and the worker survives
whatever a learner's module does: raise, exit, crash, hang, print, return objects."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from grader.course import Course
from grader.isolation import sandbox, worker_host
from grader.isolation.worker_host import WorkerSpec
from grader.session.submission import (
    BACKENDS,
    BackendContext,
    BadReturnValue,
    CallTimeout,
    CourseFault,
    StudentError,
    Submission,
    WorkerCrashed,
)
from grader.worker.loading import StudentImportError, load_module

KINDS = ["inprocess", "worker", "sandbox"]
WORKERS = ["worker", "sandbox"]

LEARNER = """
import os, signal, sys, time
import numpy as np

def double(x):
    return x * 2

def scale_in_place(x):
    x *= 10
    return x.sum()

def broken(x):
    helper = {}
    return helper["missing"]

def todo():
    raise NotImplementedError('see README.md, section "Somewhere"')

def returns_object():
    return {"ok": object()}

def huge():
    return np.zeros((64 << 20) // 8 + 1)

def chatty():
    print("hello from the learner")
    return 1

def leave():
    sys.exit(3)

def skip_the_test():
    import pytest
    pytest.skip("nothing to see")

def segfault():
    os.kill(os.getpid(), signal.SIGSEGV)

def hang():
    while True:
        time.sleep(0.1)
"""


def write_module(tmp_path, source, name="learner.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def make_backend(kind, path, tmp_path, probe_files=()):
    """A backend of `kind`: in-process, a worker, or a sandboxed worker (skipped where no sandbox
    can be made)."""
    if kind == "sandbox" and not sandbox.availability()[0]:
        pytest.skip(f"no sandbox here: {sandbox.availability()[1]}")
    spec = WorkerSpec(level=kind if kind in ("sandbox", "uid") else "none", writable_dirs=(tmp_path,),
                      probe_files=tuple(probe_files))
    context = BackendContext(tmp_path, tmp_path / f"{kind}.log", spec)
    return BACKENDS["inprocess" if kind == "inprocess" else "worker"](path, context)


@pytest.fixture(params=KINDS)
def backend(request, tmp_path):
    made = make_backend(request.param, write_module(tmp_path, LEARNER, f"learner_{request.param}.py"), tmp_path)
    yield made
    made.close()


def call(backend, name, *args, within=20.0):
    return Submission(backend, time.monotonic() + within).__getattr__(name)(*args)


def test_calls_return_data(backend):
    np.testing.assert_array_equal(call(backend, "double", np.arange(3)), [0, 2, 4])


def test_learner_code_cannot_mutate_the_tests_inputs(backend):
    x = np.ones(4)
    assert call(backend, "scale_in_place", x) == 40.0
    np.testing.assert_array_equal(x, np.ones(4))


def test_exceptions_show_only_the_learners_frames(backend):
    with pytest.raises(StudentError) as caught:
        call(backend, "broken", 1)
    info = caught.value.info
    assert info["type"] == "KeyError" and info["file"].startswith("learner")
    assert [f["function"] for f in info["frames"]] == ["broken"]
    assert "helper[\"missing\"]" in info["frames"][0]["code"]
    assert "test_backends" not in str(caught.value) and "grader" not in str(caught.value)


def test_not_implemented_is_recognised(backend):
    with pytest.raises(StudentError) as caught:
        call(backend, "todo")
    assert caught.value.not_implemented and "README" in str(caught.value)


def test_non_data_results_are_refused(backend):
    with pytest.raises(BadReturnValue, match=r"returned a value that is not data: value\['ok'\]"):
        call(backend, "returns_object")


def test_results_over_the_size_limit_are_refused_before_they_cross(backend):
    with pytest.raises(BadReturnValue, match=r"one array may be at most \d+ MiB"):
        call(backend, "huge")
    assert call(backend, "double", 3) == 6


def test_missing_function_is_a_learner_error(backend):
    with pytest.raises(StudentError, match="defines no function 'softmax'"):
        call(backend, "softmax", 1)


@pytest.mark.parametrize("name", ["leave", "skip_the_test"])
def test_exits_and_skips_fail_one_call_and_nothing_else(backend, name):
    with pytest.raises(StudentError):
        call(backend, name)
    assert call(backend, "double", 2) == 4


@pytest.mark.parametrize("kind", WORKERS)
def test_worker_crash_fails_one_call_then_restarts(tmp_path, kind):
    backend = make_backend(kind, write_module(tmp_path, LEARNER), tmp_path)
    try:
        with pytest.raises(WorkerCrashed, match="SIGSEGV"):
            call(backend, "segfault")
        assert call(backend, "double", 21) == 42
    finally:
        backend.close()


@pytest.mark.parametrize("kind", WORKERS)
def test_worker_hang_times_out_then_restarts(tmp_path, kind):
    backend = make_backend(kind, write_module(tmp_path, LEARNER), tmp_path)
    try:
        started = time.monotonic()
        with pytest.raises(CallTimeout):
            call(backend, "hang", within=1.0)
        assert time.monotonic() - started < 5
        assert call(backend, "double", 1) == 2
        assert len(backend.startup_seconds) == 2
    finally:
        backend.close()


HELD_SPAWN = """
def spawn_held_child():
    import tempfile
    fifo = os.path.join(tempfile.mkdtemp(), "fifo")
    os.mkfifo(fifo)
    pid = os.fork()
    if pid == 0:          # its spawned child opens, before its exec, a FIFO that no one writes
        os.posix_spawn("/bin/true", ["true"], {}, file_actions=[(os.POSIX_SPAWN_OPEN, 0, fifo, os.O_RDONLY, 0)])
        os._exit(0)
    for _ in range(500):
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "D":
                return "held"
        time.sleep(0.01)
    return "never held"
"""


@pytest.mark.parametrize("kind", WORKERS)
def test_a_child_held_before_its_exec_does_not_keep_the_worker_from_pausing(tmp_path, kind):
    """Between calls every process of the worker is stopped. A process spawning a child (vfork,
    posix_spawn) waits in the kernel until that child execs: with the child stopped before its
    exec, the parent never reaches the stopped state, yet cannot run either. Taking it for a
    process that refuses to stop killed the worker after each call."""
    backend = make_backend(kind, write_module(tmp_path, LEARNER + HELD_SPAWN), tmp_path)
    try:
        assert call(backend, "spawn_held_child") == "held"
        for n in range(3):
            assert call(backend, "double", n) == 2 * n
        assert len(backend.startup_seconds) == 1, "the worker was replaced: it could not be paused"
    finally:
        backend.close()


ZOMBIE_LEADER = """
import ctypes, platform, threading, time
threading.Thread(target=time.sleep, args=(120,)).start()
ctypes.CDLL(None).syscall({"x86_64": 60, "aarch64": 93}[platform.machine()], 0)     # exit(2): this thread alone
"""


def test_a_process_whose_first_thread_exited_counts_as_paused_only_once_its_other_threads_stop():
    """/proc/<pid>/stat shows the first thread: once it has exited, "Z", while the other threads
    run on. Taking that for stopped let such a process run between calls."""
    process = subprocess.Popen([sys.executable, "-c", ZOMBIE_LEADER])
    try:
        deadline = time.monotonic() + 30
        while Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the first thread never exited"
            time.sleep(0.01)
        assert not worker_host._paused(process.pid), "a process with a running thread was taken for paused"
        os.kill(process.pid, signal.SIGSTOP)
        while not worker_host._paused(process.pid):
            assert time.monotonic() < deadline, "SIGSTOP never stopped the other thread"
            time.sleep(0.01)
    finally:
        process.kill()
        process.wait()


STRAYS = """
def plant(folder):
    open(os.path.join(folder, "kept.txt"), "w").close()
    os.symlink(os.path.join(folder, "kept.txt"), os.path.join(folder, "kept-link"))
    os.makedirs(os.path.join(folder, "run"))
    os.symlink("/etc/hostname", os.path.join(folder, "run", "log.jsonl"))
    os.symlink("../../elsewhere", os.path.join(folder, "run", "dangling"))
    os.mkfifo(os.path.join(folder, "pipe"))
    return "planted"
"""


@pytest.mark.parametrize("kind", WORKERS)
def test_what_would_lead_a_test_out_of_the_shared_folder_is_removed_after_each_call(tmp_path, kind):
    """A test reads and writes, as the grader's user, files the learner's code left in the folder
    they share: a link there leading out of it would take that read or write anywhere, a named
    pipe would hang it. Such entries go as soon as the call ends, and the call fails saying so."""
    backend = make_backend(kind, write_module(tmp_path, LEARNER + STRAYS), tmp_path)
    try:
        with pytest.raises(WorkerCrashed, match="plant.. left .*log.jsonl -> /etc/hostname"):
            call(backend, "plant", str(tmp_path))
        left = {p.name for p in tmp_path.rglob("*")} - {f"{kind}.log"}
        assert left == {"learner.py", "kept.txt", "kept-link", "run"}
        assert call(backend, "double", 4) == 8
    finally:
        backend.close()


@pytest.mark.parametrize("kind", WORKERS)
def test_worker_output_goes_to_the_log_not_the_protocol(tmp_path, kind):
    backend = make_backend(kind, write_module(tmp_path, LEARNER), tmp_path)
    try:
        backend.start(time.monotonic() + 20)
        mark = backend.output_mark()
        assert call(backend, "chatty") == 1
        assert backend.output_since(mark) == "hello from the learner\n"
    finally:
        backend.close()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("source,expected", [
    (None, "was not found"),
    ("def f(:\n    pass\n", "SyntaxError"),
    ("import sys\nsys.exit('bye')\n", "SystemExit: bye"),
    ("import no_such_package_anywhere\n", "ModuleNotFoundError"),
])
def test_import_failures_are_reported_clearly(tmp_path, kind, source, expected):
    path = tmp_path / "attention.py"
    if source is not None:
        path.write_text(source)
    backend = make_backend(kind, path, tmp_path)
    with pytest.raises(StudentImportError, match=expected) as caught:
        backend.start(time.monotonic() + 20)
    assert "attention.py" in str(caught.value)
    backend.close()


@pytest.mark.parametrize("kind", WORKERS)
def test_hard_exit_at_import_is_a_crash(tmp_path, kind):
    path = write_module(tmp_path, "import os\nos._exit(7)\n")
    backend = make_backend(kind, path, tmp_path)
    try:
        with pytest.raises(WorkerCrashed, match="exit code 7"):
            backend.start(time.monotonic() + 20)
    finally:
        backend.close()


ORPHANED_GRADER = """
import sys, time
from pathlib import Path
from grader.session.submission import BACKENDS, BackendContext, Submission
from grader.isolation.worker_host import WorkerSpec
folder = Path(sys.argv[1])
spec = WorkerSpec(level="sandbox" if sys.argv[2] == "sandbox" else "none", writable_dirs=(folder,))
backend = BACKENDS["worker"](folder / "learner.py", BackendContext(folder, folder / "worker.log", spec))
worker = Submission(backend, time.monotonic() + 60).pid()     # then paused, as between any two calls
print(worker, backend._host.process.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("kind", WORKERS)
def test_paused_workers_die_with_a_killed_grader(tmp_path, kind):
    """A grading process killed between calls (the batch's watchdog, kill -9) leaves its workers
    paused: nothing it started may outlive it, sandbox or none."""
    if kind == "sandbox" and not sandbox.availability()[0]:
        pytest.skip(f"no sandbox here: {sandbox.availability()[1]}")
    write_module(tmp_path, "import os\ndef pid():\n    return os.getpid()\n")
    grader = subprocess.Popen([sys.executable, "-c", ORPHANED_GRADER, str(tmp_path), kind],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = grader.stdout.readline().split()
    finally:
        grader.kill()
        grader.wait()
    assert len(line) == 2, "the grading process did not report its worker"
    worker, host = int(line[0]), int(line[1])
    local = [host] + ([worker] if kind == "worker" else [])   # in the sandbox the worker's pid is the jail's own
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(map(_alive, local)):
        time.sleep(0.05)
    survivors = [pid for pid in local if _alive(pid)]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert not survivors, f"{survivors} (host {host}, worker {worker}) outlived the grading process that started them"


def _alive(pid: int) -> bool:
    """Running or stopped, not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("kind", WORKERS)
def test_a_worker_that_cannot_start_is_a_course_fault_with_what_it_printed(tmp_path, kind, monkeypatch):
    """The grader's side failing before the learner's module is imported (here: an interpreter
    that cannot find the worker) is not the learner's crash: it says what went wrong."""
    def no_worker(*_, **__):
        return [sys.executable, "-c", "import sys; print('no grader.worker.zygote here'); sys.exit(1)"]
    monkeypatch.setattr(worker_host, "_argv", no_worker)
    backend = make_backend(kind, write_module(tmp_path, LEARNER), tmp_path)
    try:
        with pytest.raises(CourseFault, match="could not start .*exit code 1.*no grader.worker.zygote here"):
            backend.start(time.monotonic() + 20)
        with pytest.raises(CourseFault):          # and is not retried for every test
            backend.start(time.monotonic() + 20)
    finally:
        backend.close()


@pytest.mark.parametrize("kind", WORKERS)
def test_a_probe_that_cannot_load_beside_learner_code_is_a_course_fault(tmp_path, kind):
    probe_file = tmp_path / "probes.py"
    probe_file.write_text("import sys\n"
                          "main = getattr(sys.modules['__main__'], '__spec__', None)\n"
                          "if main is not None and main.name == 'grader.worker.zygote':\n"
                          "    raise ImportError('needs something the worker lacks')\n"
                          "def observe(module):\n    return 1\n")
    probes = load_module(probe_file)
    path = write_module(tmp_path, LEARNER)
    backend = make_backend(kind, path, tmp_path, probe_files=[probe_file])
    try:
        with pytest.raises(CourseFault, match="needs something the worker lacks"):
            Submission(backend, time.monotonic() + 20).probe(probes.observe)
        assert call(backend, "double", 4) == 8          # the learner's worker is not blamed
    finally:
        backend.close()


@pytest.mark.parametrize("kind", WORKERS)
def test_a_probe_the_learners_code_replaced_is_the_learners_failure(tmp_path, kind):
    """A learner who plants a fake probe module cannot pass the blame to the course: the probe
    loaded fine in the zygote, before learner code ran."""
    probe_file = tmp_path / "probes.py"
    probe_file.write_text("def observe(module):\n    return 1\n")
    probes = load_module(probe_file)
    planted = LEARNER + textwrap.dedent(f"""
        import types
        from grader.worker.loading import module_name_for
        sys.modules[module_name_for({str(probe_file)!r})] = types.ModuleType("probes")
    """)
    path = write_module(tmp_path, planted)
    backend = make_backend(kind, path, tmp_path, probe_files=[probe_file])
    try:
        with pytest.raises(StudentError, match="replaced or broke what it needs") as raised:
            Submission(backend, time.monotonic() + 20).probe(probes.observe)
        assert not isinstance(raised.value, CourseFault)
    finally:
        backend.close()


WITNESSED_PROBES = """
def tally_doubles(module, witness, n):
    return [witness.tally(module.double(i)) for i in range(n)]

def runs(module, witness, name):
    return getattr(module, name)()

def asks(module, witness, question, *args):
    try:
        return getattr(witness, question)(*args)
    except RuntimeError as exc:
        return f"refused: {exc}"
"""


class Tally:
    """A witness: it sees the values a probe reports to it, here in the test's process."""
    QUESTIONS = ("tally",)

    def __init__(self):
        self.seen = []

    def tally(self, value):
        if type(value) is not int:
            raise TypeError("tally takes whole numbers")
        self.seen.append(value)
        return len(self.seen)

    def answer_key(self):                   # a method the witness does not offer
        return "the hidden answer"


def with_witnessed_probes(kind, tmp_path, learner_source):
    """A backend of `kind` for `learner_source`, and the module of WITNESSED_PROBES it may run."""
    probe_file = tmp_path / "probes.py"
    probe_file.write_text(WITNESSED_PROBES)
    backend = make_backend(kind, write_module(tmp_path, learner_source), tmp_path, probe_files=[probe_file])
    return backend, load_module(probe_file)


@pytest.mark.parametrize("kind", KINDS)
def test_a_witnessed_probe_asks_the_tests_witness_which_answers_only_what_it_offers(tmp_path, kind):
    backend, probes = with_witnessed_probes(kind, tmp_path, LEARNER)
    try:
        submission, tally = Submission(backend, time.monotonic() + 20), Tally()
        assert submission.probe(probes.tally_doubles, 3, witness=tally) == [1, 2, 3]
        assert tally.seen == [0, 2, 4], "the witness, in this process, saw what the probe reported"
        assert submission.probe(probes.asks, "answer_key", witness=tally) == \
            "refused: the witness answers tally, not 'answer_key'"
        assert submission.probe(probes.asks, "tally", "2", witness=tally) == "refused: TypeError: tally takes whole numbers"
        assert tally.seen == [0, 2, 4]
    finally:
        backend.close()


CHANNEL_USERS = LEARNER + textwrap.dedent("""
    import gc, time
    from grader.worker import dispatch

    def _channel():
        return next(o for o in gc.get_objects() if type(o).__name__ == "Channel")

    def asks_too_often():
        channel = _channel()
        for _ in range(dispatch.MAX_QUESTIONS + 1):
            channel.send(*dispatch.question("tally", (1,)))
            channel.receive()

    def never_reads_the_answers():
        channel = _channel()
        for _ in range(40):
            channel.send(*dispatch.question("tally", (list(range(20_000)),)))
        time.sleep(60)

    def ask_on_its_own():
        channel = _channel()
        channel.send(*dispatch.question("tally", (1,)))
        return channel.receive()
""")


class Echo(Tally):
    def tally(self, value):             # answers with what it was given
        return value


@pytest.mark.parametrize("kind", WORKERS)
@pytest.mark.parametrize("function, failure, message", [
    ("asks_too_often", WorkerCrashed, "broken reply.*more than 1000 questions"),
    ("never_reads_the_answers", CallTimeout, "did not return within the time limit"),
])
def test_questions_are_bounded_by_number_and_by_the_calls_deadline(tmp_path, kind, function, failure, message):
    """The trusted side answers a bounded number of questions per call, and its answers to a
    worker that stops reading them cannot hold it past the call's deadline."""
    backend, probes = with_witnessed_probes(kind, tmp_path, CHANNEL_USERS)
    try:
        started = time.monotonic()
        with pytest.raises(failure, match=message):
            Submission(backend, time.monotonic() + 5).probe(probes.runs, function, witness=Echo())
        assert time.monotonic() - started < 15
        assert call(backend, "double", 4) == 8          # a fresh worker answers the next call
    finally:
        backend.close()


@pytest.mark.parametrize("kind", WORKERS)
def test_a_question_outside_a_witnessed_probe_is_a_broken_reply(tmp_path, kind):
    """Learner code that finds the worker's channel and asks a question of its own, where the
    test gave no witness: the worker is replaced, as for any message that is not a reply."""
    backend = make_backend(kind, write_module(tmp_path, CHANNEL_USERS), tmp_path)
    try:
        with pytest.raises(WorkerCrashed, match="broken reply.*outside a witnessed probe"):
            call(backend, "ask_on_its_own")
        assert call(backend, "double", 4) == 8          # a fresh worker answers the next call
    finally:
        backend.close()


def test_a_course_kept_in_tmp_is_read_only_in_the_sandbox(tmp_path_factory, monkeypatch, request):
    """A course below /tmp (a CI clone, an unpacked Gradescope zip): the folders above the files
    bound into the jail are not the jail's writable /tmp, so nothing can be planted beside them."""
    if not sandbox.availability()[0]:
        pytest.skip(f"no sandbox here: {sandbox.availability()[1]}")
    course = Path(tempfile.mkdtemp(prefix="course-", dir="/tmp"))     # wherever pytest keeps its own
    request.addfinalizer(lambda: shutil.rmtree(course, ignore_errors=True))
    scratch = tmp_path_factory.mktemp("scratch")
    probe_file = course / "tests" / "hidden" / "probes.py"
    probe_file.parent.mkdir(parents=True)
    probe_file.write_text("def observe(module):\n    return 1\n")
    path = write_module(scratch, textwrap.dedent(f"""
        def plant(name):
            try:
                with open({str(probe_file.parent)!r} + "/" + name, "w") as f:
                    f.write("planted")
            except OSError as exc:
                return type(exc).__name__ + ": " + str(exc)
            return "planted"
        def write_scratch():
            with open({str(scratch)!r} + "/note.txt", "w") as f:
                f.write("ok")
            return "written"
    """))
    spec = WorkerSpec(level="sandbox", course=Course(course), writable_dirs=(scratch,), probe_files=(probe_file,))
    backend = BACKENDS["worker"](path, BackendContext(scratch, scratch / "log", spec))
    try:
        assert "Read-only file system" in call(backend, "plant", "__init__.py")
        assert call(backend, "write_scratch") == "written"       # the folders meant to be written still are
    finally:
        backend.close()

