"""A batch graded as one Slurm job array, submitted through submitit: each array task grades a
few submissions (`per_task`, one by default) on its node with `grade_chunk`, and writes each
report into the batch's out-dir, which must be on a file system the nodes share (so must
submitit's folder, where the jobs' pickles and logs go).

The controller (`grader grade --executor slurm`) waits for the reports to appear and reads the
array's states from `squeue`, never from sacct: a cluster without an accounting database
answers no sacct query, and submitit, which asks sacct, would wait for ever on a job that was
killed. A task that Slurm ended before its submissions' reports were written (cancelled, past
its time limit, out of memory, its node lost) leaves for each of them a report that says so,
which `--resume` grades again (`NOT_FINISHED`). Interrupting the controller cancels the array,
so that nothing keeps grading behind a batch that will be resumed.
"""
from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path

from grader.running import budgets
from grader.running.executors import NOT_FINISHED, finished_report, grade_chunk, save
from grader.schema.report import REPORT_NAME, ScoreReport

FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
                "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"}
RUNNING_STATES = {"RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING", "RESIZING"}
POLL_S = 2.0                 # how often the controller looks at the out-dir and squeue
MAX_RUNNING = 64             # array tasks at once, unless --max-tasks says otherwise
GONE = ""                    # the state of a task Slurm no longer remembers (MinJobAge after its end)


@dataclass
class SlurmOptions:
    folder: Path                       # submitit's: job scripts, pickles and logs, on the shared file system
    partition: str | None = None
    time_min: int | None = None        # default: budgets.time_limit_min of a task's submissions
    mem_gb: float | None = None        # default: budgets.memory_mb of a task's gradings at once
    cpus_per_task: int | None = None   # default: budgets.cpus of a task's gradings at once
    gpus_per_task: int = 0
    max_running: int = MAX_RUNNING
    per_task: int = 1                  # submissions graded by one array task
    jobs: int = 1                      # of which at once
    poll_s: float = POLL_S
    isolation: str = "auto"            # as asked: each node resolves it (grader.isolation.levels.resolve)


@dataclass
class SlurmExecutor:
    options: SlurmOptions

    def run(self, units, template, limit_s, on_done, on_poll=None) -> None:
        if not units:
            return
        if any(unit.folder is None for unit in units):
            raise ValueError("a Slurm batch keeps its reports in an --out-dir, on a file system the nodes share")
        # the jobs may start elsewhere than here: every path absolute, the submission's as recorded in its report
        units = [replace(unit, path=str(Path(unit.path).absolute()), folder=unit.folder.absolute()) for unit in units]
        for unit in units:
            unit.folder.mkdir(parents=True, exist_ok=True)
            (unit.folder / REPORT_NAME).unlink(missing_ok=True)      # any report found from now on is this batch's
        per_task = max(1, self.options.per_task)
        chunks = [units[i:i + per_task] for i in range(0, len(units), per_task)]
        gradings = min(max(1, self.options.jobs), per_task)
        executor = self._executor(per_task, gradings, limit_s)
        jobs = executor.map_array(grade_chunk, chunks, [template] * len(chunks), [limit_s] * len(chunks),
                                  [gradings] * len(chunks), [self.options.isolation] * len(chunks))
        array_id = jobs[0].job_id.split("_")[0]
        try:
            _watch(array_id, [(job, unit) for job, chunk in zip(jobs, chunks) for unit in chunk],
                   self.options.poll_s, on_done, on_poll)
        except BaseException:
            subprocess.run(["scancel", array_id], capture_output=True)
            raise

    def _executor(self, per_task: int, gradings: int, limit_s: float):
        import submitit  # the cluster extra: only a Slurm batch needs it
        o = self.options
        executor = submitit.AutoExecutor(folder=o.folder, cluster="slurm")
        parameters = dict(
            name="grader",
            timeout_min=o.time_min or budgets.time_limit_min(per_task, gradings, limit_s),
            mem_gb=o.mem_gb or budgets.memory_mb(gradings) / 1024,
            cpus_per_task=o.cpus_per_task or budgets.cpus(gradings),
            slurm_array_parallelism=o.max_running,
            # Slurm's own time limit ends a task, not submitit's early USR2 (which would turn into a
            # failure 90 s before it); and the function runs in the batch script, not in an srun step,
            # which outlives a cancellation by seconds
            slurm_signal_delay_s=0, slurm_use_srun=False)
        if o.partition:
            parameters["slurm_partition"] = o.partition
        if o.gpus_per_task:
            parameters["slurm_gpus_per_task"] = o.gpus_per_task
        executor.update_parameters(**parameters)
        return executor


def _watch(array_id: str, waiting: list, poll_s: float, on_done, on_poll) -> None:
    """Until every unit has its report: each one found in its folder, or written here for a task
    Slurm ended without it."""
    waiting = list(waiting)
    while waiting:
        states = array_states(array_id)      # read before the reports: a task seen ended has written all it will
        still = []
        for job, unit in waiting:
            report = finished_report(unit)
            if report is None:
                state, reason = states.get(job.job_id, (GONE, "")) if states is not None else (None, "")
                if state is None or (state != GONE and state not in FINAL_STATES):
                    still.append((job, unit))
                    continue
                report = ScoreReport.failed(ended_without_report(job, state, reason), {"path": unit.path})
                save(report, unit.folder)
            on_done(unit, report)
        waiting = still
        if on_poll and states is not None:
            running = sum(1 for job, _ in waiting if states.get(job.job_id, (GONE,))[0] in RUNNING_STATES)
            on_poll(running, len(waiting) - running)
        if waiting:
            time.sleep(poll_s)


def array_states(array_id: str) -> dict[str, tuple[str, str]] | None:
    """{task id: (state, reason)} of the array's tasks Slurm remembers; {} once it remembers none;
    None when squeue did not answer (the next poll asks again)."""
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-j", array_id, "-o", "%i|%T|%r"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return {} if "Invalid job id" in out.stderr else None
    states = {}
    for line in out.stdout.splitlines():
        task, state, reason = (line.strip().split("|") + ["", ""])[:3]
        states[task] = (state, reason)
    return states


def ended_without_report(job, state: str, reason: str) -> str:
    how = state or "no longer known to Slurm"
    if reason and reason != "None":
        how += f", reason {reason}"
    last = _last_line(job.paths.stderr)
    said = f"; its log ends: {last}" if last else ""
    return (f"{NOT_FINISHED}: Slurm ended job {job.job_id} ({how}) before this submission's report was written"
            f"{said}; log: {job.paths.stderr}; `grader grade --resume` grades it again")


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()[-50:] if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""
