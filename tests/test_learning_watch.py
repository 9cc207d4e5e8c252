"""`grader watch` driven as a person would, in a real terminal (tmux): start it on the stub, save a
fix, a syntax error, an endless loop, the stub again and wrong answers, read the screen after each
save, then leave with Ctrl-C; on exercise 04, follow the focus from concept to concept as the
learner fixes one, moves it with --concept and the n key, and is hinted at the focused one only.
Those tests skip, saying why, where tmux is not installed (.ci/run installs it).
Also: a kill or a hang-up ends the watcher without leaving its scratch folder, and importing the
watch loop loads no library that reads its thread count on loading."""
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from grader.course import COURSE
from grader.learning.progress import HINT_AFTER_FAILING_RUNS
from grader.readme import concepts_of

TASK = COURSE.task_named("01")
STARTUP_S = 120          # the first screen: torch and the libraries imported on a loaded 2-core box
CHECK_S = 30             # a check of the reference takes about a second; a loaded box, much longer
HANG_S = 90              # a test's own 30 s limit, then the screen
WIDTH, HEIGHT = 160, 70

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (apt-get install tmux; .ci/run does)")


class Terminal:
    """One tmux session running one command, read back as the person would see it."""

    def __init__(self, command: str, env: dict):
        self.name = f"grader-watch-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
        # The shell stays after the command, so that its exit line can be read. COLUMNS and LINES go:
        # the screen must be as wide as the terminal, and readline, once loaded into this process with
        # no terminal, sets them to 80 and 24 in what its children (the tmux server) inherit.
        script = f"unset COLUMNS LINES; export {exports}; {command}; echo \"[exited $?]\"; sleep 600"
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", str(WIDTH), "-y", str(HEIGHT),
                        "bash", "-c", script], check=True)

    def screen(self) -> str:
        out = subprocess.run(["tmux", "capture-pane", "-p", "-J", "-t", self.name], capture_output=True, text=True)
        return out.stdout

    def wait_for(self, pattern: str, limit_s: float) -> str:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            text = self.screen()
            if re.search(pattern, text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"no {pattern!r} on the screen after {limit_s:g} s; it shows:\n{self.screen()}")

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def first_hint(concept: str) -> str:
    """The first hint of `concept`, read from the hints file the plain way (its first numbered line)."""
    text = (TASK.exercise_dir / "hints.md").read_text(encoding="utf-8")
    section = text.split(f"## {concept}\n", 1)[1]
    return re.search(r"^1\. (.+)$", section, re.M).group(1)


def watching(tmp_path: Path, task, source: str, *options: str) -> tuple[Terminal, Path]:
    """`grader watch` of `task` in a terminal, on a copy of the module holding `source`."""
    module = tmp_path / "impl" / task.name / f"{task.module}.py"
    module.parent.mkdir(parents=True)
    module.write_text(source, encoding="utf-8")
    env = {"GRADER_PROGRESS": str(tmp_path / "progress.json"), "GRADER_LANG": "en", "OMP_NUM_THREADS": "1",
           "PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": os.environ["PYTHONDONTWRITEBYTECODE"]}   # conftest's
    grader = Path(sys.executable).with_name("grader")
    command = [str(grader), "watch", task.name[:2], "--impl", str(module.parent.parent), *options]
    return Terminal(shlex.join(command), env), module


@pytest.fixture
def terminal(tmp_path):
    term, module = watching(tmp_path, TASK, (COURSE.exercises / TASK.name / f"{TASK.module}.py").read_text(encoding="utf-8"))
    yield term, module
    term.close()


def save(module: Path, text: str) -> None:
    module.write_text(text, encoding="utf-8")


@needs_tmux
def test_watch_follows_the_learners_saves(terminal):
    term, module = terminal
    screen = term.wait_for(r"check 1 at .*points", STARTUP_S)
    assert "0 / 14.5 points" in screen
    assert re.search(r"focus: .* · failed", screen) and "is not implemented yet" in screen
    assert re.search(r"Your line \d+, in softmax", screen)
    assert "Stable softmax" in screen and "to fix" in screen
    assert "hint 1 of" not in screen, "no hint before a concept has failed three runs"

    save(module, (COURSE.solutions / TASK.name / module.name).read_text(encoding="utf-8"))
    screen = term.wait_for(r"check 2 at .*points", CHECK_S)
    assert "14.5 / 14.5 points" in screen and "every visible test passed" in screen
    assert "to fix" not in screen

    save(module, "import math\n\n\ndef softmax(x, axis=-1:\n    return x\n")
    screen = term.wait_for(r"check 3 at .*points", CHECK_S)
    assert "every test stopped at the same error" in screen
    assert "could not be imported: SyntaxError" in screen and "line 4" in screen

    reference = (COURSE.solutions / TASK.name / module.name).read_text(encoding="utf-8")
    save(module, reference.replace("def softmax(x, axis=-1):\n", "def softmax(x, axis=-1):\n    while True:\n"
                                                                  "        pass\n", 1))
    screen = term.wait_for(r"check 4 at .*points", HANG_S)
    assert re.search(r"focus: .* · timeout", screen) and "did not finish in time" in screen, screen
    assert "stopped after a test ran past its time limit" in screen
    assert re.search(r"Your line \d+, in softmax: (while True:|pass)", screen), "the hang is pointed at the loop"

    # The stub again: a concept not started (NotImplementedError) is no work on it, and gets no hint.
    save(module, (COURSE.exercises / TASK.name / module.name).read_text(encoding="utf-8"))
    screen = term.wait_for(r"check 5 at .*points", CHECK_S)
    assert "hint 1 of" not in screen, "a hint for a concept not started"

    # Wrong answers after the hang: softmax's concepts fail runs that reach them, without a gain, and the
    # focused one's hint comes on the third (the hang's check counts where its child reached softmax's tests).
    assert HINT_AFTER_FAILING_RUNS == 3
    for check, wrong in ((6, "return x"), (7, "return x * 2"), (8, "return x * 3")):
        save(module, f"{reference}\n\ndef softmax(x, axis=-1):\n    {wrong}\n")
        screen = term.wait_for(rf"check {check} at .*points", CHECK_S)
        if "hint 1 of" in screen:
            break
    # The focus is the concept whose results changed first in the README's order, and which of softmax's
    # concepts that is after the hang depends on the test the hang stopped: the hint is the focused one's.
    concept = focused(screen)
    assert concept in ("Broadcasting", "Stable softmax"), screen
    assert check >= 7 and f"hint 1 of 3 · {concept}" in screen, screen
    assert " ".join(first_hint(concept).split()[:6]) in " ".join(screen.split())
    assert f'grader hint {TASK.name[:2]} "{concept}"' in " ".join(screen.split())

    term.keys("C-c")
    screen = term.wait_for(r"\[exited \d+\]", 15)
    assert "stopped watching." in screen and "[exited 0]" in screen
    assert "Traceback" not in screen


MEMORY = COURSE.task_named("04")
# Wrong answers to three of 04's concepts, each appended to the reference (a later definition wins).
WRONG = {"Decode and prefill": "def decode_ms_per_token(n_params, bytes_per_param, mem_bandwidth):\n"
                               "    return n_params * bytes_per_param / mem_bandwidth\n",        # seconds, not ms
         "Arithmetic intensity": "def ridge_point(peak_flops, mem_bandwidth):\n    return {value}\n",
         "Which block did the OOM land in?": "def oom_culprit(before, after):\n    return 'weights'\n"}


def memory_module(*broken: str, ridge: float = 0.0) -> str:
    reference = (COURSE.solutions / MEMORY.name / f"{MEMORY.module}.py").read_text(encoding="utf-8")
    return reference + "".join("\n\n" + WRONG[concept].format(value=ridge) for concept in broken)


def focused(screen: str) -> str:
    """The concept the screen marks as focused, and says is."""
    marked = re.search(r"▶ (.+?)\s*│", screen)
    said = re.search(r"focus: (.+?) · ", screen)
    assert marked and said and marked.group(1).strip() == said.group(1).strip(), screen
    return said.group(1).strip()


@needs_tmux
def test_the_focus_follows_the_concept_being_worked_on_and_hints_only_at_it(tmp_path):
    """Three concepts of 04 wrong: started on the last (--concept), n moves round to the first
    failing in the README's order; fixing it moves the focus to the next failing one; the third
    failing check of that one brings its hint, and none of the other, also failing three times."""
    term, module = watching(tmp_path, MEMORY, memory_module(*WRONG), "--concept", "which block")
    try:
        screen = term.wait_for(r"check 1 at .*points", STARTUP_S)
        assert focused(screen) == "Which block did the OOM land in?"
        readme_order = [c for c in concepts_of(MEMORY) if c in screen]
        assert readme_order.index("Decode and prefill") < readme_order.index("Arithmetic intensity")
        for concept in WRONG:          # every failing concept listed with its reason
            assert re.search(rf"{re.escape(concept)}\s*│\s*0 / [\d.]+\s*│\s*to fix\s*│\s*\S", screen), screen
        assert "hint 1 of" not in screen
        # a passing concept: its visible checks pass, and what the graded suite checks beyond them (the README's list)
        assert re.search(r"Parameters from a config\s*│[^│]*│\s*passes\s*│\s*visible checks pass", screen), screen
        assert "passes: the visible checks pass; the graded suite checks more" in " ".join(screen.split())

        term.keys("n")                 # round the end: the first failing concept in the README's order
        screen = term.wait_for(r"focus: Decode and prefill · ", CHECK_S)
        assert focused(screen) == "Decode and prefill" and "check 1 at" in screen

        save(module, memory_module("Arithmetic intensity", "Which block did the OOM land in?"))
        screen = term.wait_for(r"check 2 at .*points", CHECK_S)
        assert focused(screen) == "Arithmetic intensity", "fixed: on to the next failing concept in the README's order"
        assert "hint 1 of" not in screen

        assert HINT_AFTER_FAILING_RUNS == 3
        save(module, memory_module("Arithmetic intensity", "Which block did the OOM land in?", ridge=1.0))
        screen = term.wait_for(r"check 3 at .*points", CHECK_S)
        assert focused(screen) == "Arithmetic intensity"
        assert "hint 1 of" in screen and "· Arithmetic intensity" in screen, screen
        assert "· Which block" not in screen.split("hint 1 of", 1)[1], "a hint for a concept not in focus"

        term.keys("n")                 # the hint stays with its concept: not under another's focus
        screen = term.wait_for(r"focus: Which block", CHECK_S)
        assert "hint 1 of" not in screen, screen
        term.keys("p")
        screen = term.wait_for(r"focus: Arithmetic intensity · ", CHECK_S)
        assert "hint 1 of 3 · Arithmetic intensity" in " ".join(screen.split()), screen
    finally:
        term.close()


@pytest.mark.parametrize("ending", ["SIGTERM", "SIGHUP"])
def test_a_watcher_killed_or_hung_up_leaves_no_scratch_folder(tmp_path, ending):
    """A closed terminal (SIGHUP) or a kill (SIGTERM) ends the watcher as Ctrl-C does: its scratch
    folder, where the checks keep their files, is removed."""
    import signal

    impl = tmp_path / "impl" / TASK.name
    impl.mkdir(parents=True)
    shutil.copy(COURSE.solutions / TASK.name / f"{TASK.module}.py", impl)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "GRADER_PROGRESS": "off", "OMP_NUM_THREADS": "1"}
    watcher = subprocess.Popen([sys.executable, "-m", "grader.cli", "watch", "01", "--impl", str(impl.parent)],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + STARTUP_S
        while not list(scratch.glob("grader-watch-*")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert list(scratch.glob("grader-watch-*")), "the watcher made no scratch folder"
        watcher.send_signal(getattr(signal, ending))
        watcher.wait(timeout=STARTUP_S)
    finally:
        watcher.kill()
    assert not list(scratch.glob("grader-watch-*")), f"{ending} left the watcher's scratch folder behind"


def test_the_watch_loop_loads_no_threaded_library_before_it_sets_their_threads():
    """numpy and torch read their thread counts when they are loaded: importing the watch loop must
    load neither, or the one-thread setting `watch` makes comes too late for them."""
    probe = "import sys, grader.learning.watch; print(sorted({'numpy', 'torch'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"loaded on import: {done.stdout.strip()}"
