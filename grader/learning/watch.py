"""`grader watch [TASK] [--concept NAME]`: the warm loop. One process per task imports pytest, the
libraries and the visible tests' helpers once (never the learner's module); each save of the
learner's module or of a visible test file starts a fresh check in a forked child
(`grader.learning.session`), and the screen shows the concepts in the README's order, each failing
one with its reason, the focused concept's first failing test in full with the learner's own line
(`grader.learning.focus`: the concept being worked on; the `n` and `p` keys move it), and a hint
once the focused concept keeps failing. A module that does not import, loops or crashes costs that
check alone: the watcher stays.
"""
from __future__ import annotations

import gc
import os
import queue
import select
import signal
import sys
import tempfile
import termios
import threading
import tty
from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.text import Text

from grader.course import COURSE, Task, locate_module
from grader.learning.focus import Focus
from grader.learning.hints import Hint
from grader.learning.warm import import_quietly, warm_up
from grader.readme import concepts_of, graded_checks
from grader.running.threads import ONE_THREAD_ENV
from grader.schema.report import ScoreReport

# watchfiles yields a burst of events (an editor's write, rename and chmod) this long after the
# last one: short against the 2 s budget, long enough to see one save as one change.
SETTLE_MS = 50
# A burst that never settles (a formatter rewriting the file) is yielded after this long anyway.
BURST_LIMIT_MS = 400
# The spinner while a check runs redraws this often: slow enough to leave both cores to the check's
# children (rich's default, 12.5, costs a check about a tenth of a second on two cores).
CHECK_SPINNER_HZ = 4
STEP_KEYS = {b"n": 1, b"p": -1}       # the next or previous failing concept
FOOTER = "watching {module} and the visible tests; save to check again, n / p: next / previous failing concept, " \
         "Ctrl-C to stop"


def default_task(progress_by_task: dict) -> Task:
    """The first exercise not complete yet (by the progress the learner's runs left), else the first."""
    tasks = COURSE.tasks()
    return next((t for t in tasks if not (t.name in progress_by_task and progress_by_task[t.name].complete)), tasks[0])


def watched_names(task: Task) -> set[str]:
    return {f"{task.module}.py", *(p.name for p in task.exercise_dir.glob("test_*.py"))}


# ---------------------------------------------------------------- the loop

class Watcher:
    def __init__(self, task: Task, impl: Path, console: Console, lang: str, concept: str | None = None):
        self.task, self.impl, self.console, self.lang = task, Path(impl), console, lang
        self.module_path = locate_module(self.impl, task)
        self.saves: queue.Queue[bool] = queue.Queue()     # each save: whether a visible test file changed
        self.steps: queue.Queue[int] = queue.Queue()      # each key that moves the focus: +1 or -1
        self.stop = threading.Event()
        self.hint: Hint | None = None          # the hint offered last: kept until its concept passes, shown under its focus
        self.focus = Focus(concepts_of(task), concept)
        self.graded = graded_checks(task)       # what the hidden suite checks beyond the visible tests, per concept
        self.shown: tuple[ScoreReport, Text] | None = None     # the last check's report and header
        self.leaving = threading.Event()       # set by Ctrl-C, a hang-up or a kill (see `watch`)

    def run(self) -> int:
        from grader.learning.session import CheckChild
        with self.console.status(f"loading the libraries of {self.task.name}"):
            warm_up(self.task, self.impl)
        gc.freeze()          # what the watcher holds is shared with every child, never rescanned
        threads = [threading.Thread(target=target, daemon=True) for target in (self._watch_files, self._read_keys)]
        for thread in threads:
            thread.start()
        try:
            with tempfile.TemporaryDirectory(prefix="grader-watch-") as workdir:
                child = CheckChild(self.task, self.impl, Path(workdir))
                try:
                    self.saves.put(False)            # a first check at once
                    while True:
                        if self._wait_for_save():    # the children forked ahead collected the old tests
                            child.discard()
                        self._check(child)
                finally:
                    child.discard()
        except KeyboardInterrupt:
            pass
        finally:
            self.stop.set()
            for thread in threads:
                thread.join(timeout=2)
        self.console.print("stopped watching.")
        return 0

    def _watch_files(self) -> None:
        import watchfiles
        names = watched_names(self.task)
        folder = self.module_path.parent
        only_ours = lambda change, path: Path(path).name in names      # noqa: E731 (a filter, one line)
        for changes in watchfiles.watch(folder, watch_filter=only_ours, step=SETTLE_MS, debounce=BURST_LIMIT_MS,
                                        stop_event=self.stop, raise_interrupt=False):
            self.saves.put(any(Path(path).name != self.module_path.name for _, path in changes))

    def _read_keys(self) -> None:
        """The keys that move the focus, read one at a time from the terminal (left as it was found)."""
        fd = sys.stdin.fileno() if sys.stdin is not None else -1
        if fd < 0 or not os.isatty(fd):
            return
        before = termios.tcgetattr(fd)
        try:
            tty.setcbreak(fd)            # a key at a time, not echoed; Ctrl-C still interrupts
            while not self.stop.is_set():
                if select.select([fd], [], [], 0.2)[0]:
                    step = STEP_KEYS.get(os.read(fd, 1))
                    if step is not None:
                        self.steps.put(step)
        finally:
            termios.tcsetattr(fd, termios.TCSADRAIN, before)

    def _take_steps(self) -> None:
        """Move the focus by the keys pressed since the last look, and show the last check again."""
        moved = False
        while not self.steps.empty():
            step = self.steps.get_nowait()
            task = self.shown[0].task(self.task.name) if self.shown else None
            if task is not None:
                self.focus.step(task, step)
                moved = True
        if moved and self.shown:
            self._show(*self.shown)

    def _wait_for_save(self) -> bool:
        """Wait for a save (several while the last check ran make one check): whether a visible
        test file was among them."""
        while True:
            if self.leaving.is_set():
                raise KeyboardInterrupt
            self._take_steps()
            try:
                tests_changed = self.saves.get(timeout=0.2)      # a timeout: leaving and keys are seen at once
                break
            except queue.Empty:
                continue
        while not self.saves.empty():
            tests_changed |= self.saves.get_nowait()
        return tests_changed

    def _check(self, child) -> None:
        from grader.learning import hints, progress
        with self.console.status(f"checking {self.module_path.name}", refresh_per_second=CHECK_SPINNER_HZ) as status:
            result = child.check(on_test=lambda name, limit: status.update(f"checking: {name} (limit {limit:g} s)"),
                                 cancelled=lambda: not self.saves.empty() or self.leaving.is_set())
        if result.cancelled:            # a newer save (its check comes next), or leaving
            return
        due = progress.record(result.report, source="watch").get(self.task.name, [])
        task = result.report.task(self.task.name)
        if task is not None:
            self.focus.follow(task)
        if self.focus.concept in due:          # hints for the concept being worked on, not the others
            self.hint = hints.next_hint(self.task, self.focus.concept, self.lang, asked=False) or self.hint
        if self.hint is not None and (task is None or self.hint.concept not in self.focus.failing(task)):
            self.hint = None
        total = task.points if task else 0
        header = Text.assemble(("grader watch ", "bold"), f"{self.task.name}: {self.task.title}\n",
                               f"check {child.runs} at {datetime.now():%H:%M:%S}, {result.seconds:.2f} s: ",
                               (f"{total:g} / {task.max_points if task else 0:g} points", "bold"))
        self.shown = (result.report, header)
        self._show(result.report, header)
        import_quietly(result.imported)       # what this check loaded beyond the warm-up: warm for the next
        child.prepare()                       # the next check's children, waiting for the next save

    def _show(self, report: ScoreReport, header: Text) -> None:
        from grader.learning.screen import check_screen
        self.console.clear()
        hint = self.hint if self.hint is not None and self.hint.concept == self.focus.concept else None
        self.console.print(check_screen(report, self.task.name, header, hint,
                                        FOOTER.format(module=self.module_path.name), self.focus, self.console.width,
                                        self.graded))


def watch(task: Task, impl: Path, console: Console, lang: str, concept: str | None = None) -> int:
    # One thread for torch, as the grading pool runs (`grader.running.threads`): spinning OpenMP
    # threads slow the learner's other work. Set before warm_up imports numpy and torch.
    for name, value in ONE_THREAD_ENV.items():
        os.environ.setdefault(name, value)
    watcher = Watcher(task, impl, console, lang, concept)

    def leave(signum, frame):
        """Ctrl-C, a closed terminal, a kill: leave, the scratch folder removed. The exception
        alone could be swallowed where Python ignores exceptions (a finaliser, a fork's handler):
        the flag is seen by the loop's next look at it, whatever became of the exception."""
        watcher.leaving.set()
        raise KeyboardInterrupt

    for ending in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(ending, leave)
    return watcher.run()
