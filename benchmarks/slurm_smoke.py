"""submitit against the one-node Slurm of `.ci/slurm-up`: a job array of a few cases (results,
an exception, one that outlives its time limit), jobs cancelled while they run, and what Slurm
and submitit each say about every one of them; then the overhead per job and the array
throughput on this node. A benchmark, not a test: it prints figures and asserts nothing.

    .ci/slurm-up && python benchmarks/slurm_smoke.py      # every figure (about 2 minutes)
    python benchmarks/slurm_smoke.py --skip-cases --throughput 40

Without an accounting database sacct knows no job, so submitit's own `job.state` stays UNKNOWN
and its `job.done()` is true only once the job wrote its result file: a job killed from outside
(cancelled, past its time limit, out of memory) never becomes done there. This script reads a
job's end state from Slurm itself (squeue remembers a finished job for MinJobAge seconds).
"""
import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import submitit

PARTITION = "debug"
# Slurm counts time limits in whole minutes and checks them every 30 s: a job asking for one
# minute ends between 60 and 90 s after it started.
TIME_LIMIT_MIN = 1
FINAL_WAIT_S = 150
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


def run_case(case: str):
    """One job: returns when it started and ended by its own clock, or fails as asked."""
    start = time.time()
    if case.startswith("sleep"):
        time.sleep(float(case[len("sleep"):]))
    elif case == "raise":
        raise ValueError("this case raises on purpose")
    elif case == "overtime":
        time.sleep(TIME_LIMIT_MIN * 60 + 120)
    return {"case": case, "start": start, "end": time.time()}


def slurm_state(job_id: str) -> tuple[str, str]:
    """(state, reason) as Slurm holds them; ("", "") once Slurm has forgotten the job."""
    out = subprocess.run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T|%r"],
                         capture_output=True, text=True).stdout.strip()
    state, _, reason = out.partition("|")
    return state, reason


def wait_final(jobs, limit_s: float) -> dict[str, float]:
    """When each job was first seen finished: its result file written, or Slurm saying so."""
    seen: dict[str, float] = {}
    deadline = time.time() + limit_s
    while len(seen) < len(jobs) and time.time() < deadline:
        for job in jobs:
            if job.job_id not in seen and (job.paths.result_pickle.exists() or slurm_state(job.job_id)[0] in FINAL):
                seen[job.job_id] = time.time()
        time.sleep(0.1)
    return seen


def outcome(job) -> str:
    """What submitit says: its result or its exception, read only when the result file exists
    (job.result() would wait for ever on a job that never wrote one)."""
    if not job.paths.result_pickle.exists():
        return "no result file: job.result() would wait for ever"
    try:
        return f"result {job.result()!r}"
    except Exception as error:  # noqa: BLE001 - reporting whatever submitit raises
        trace = [line for line in str(error).splitlines() if line.strip()]
        raised = next((line for line in reversed(trace) if not line.startswith(("-", " ", "You can"))), "")
        return f"raises {type(error).__name__}, whose trace ends: {raised}"


def executor(folder: Path, parallelism: int = 2, **changes) -> submitit.AutoExecutor:
    """submitit's defaults, but for what `changes` names (slurm_signal_delay_s, slurm_use_srun)."""
    ex = submitit.AutoExecutor(folder=folder, cluster="slurm")
    ex.update_parameters(slurm_array_parallelism=parallelism, timeout_min=TIME_LIMIT_MIN, mem_gb=0.5,
                         cpus_per_task=1, slurm_partition=PARTITION, **changes)
    return ex


def report(label: str, job, submitted: float, seen: dict[str, float]) -> None:
    print(f"  {job.job_id:<6} {label:<34} Slurm {slurm_state(job.job_id)}, submitit job.state {job.state!r}")
    print(f"  {'':<41} {outcome(job)}")
    if job.job_id not in seen:
        return
    line = f"seen finished {seen[job.job_id] - submitted:.1f} s after submission"
    if job.paths.result_pickle.exists() and label.startswith("sleep"):
        result = job.result()
        line += (f"; submission to start {result['start'] - submitted:.2f} s, function "
                 f"{result['end'] - result['start']:.2f} s, end to result seen {seen[job.job_id] - result['end']:.2f} s")
    print(f"  {'':<41} {line}")


def cancel_when_running(job) -> float:
    """Seconds from job.cancel() (scancel) to Slurm calling the job finished."""
    while slurm_state(job.job_id)[0] != "RUNNING":
        time.sleep(0.1)
    time.sleep(3)  # let submitit's process start inside the job
    cancelled = time.time()
    job.cancel()
    return wait_final([job], 30).get(job.job_id, float("nan")) - cancelled


def cases_and_cancel(folder: Path) -> None:
    """The array with submitit's defaults (USR2 90 s before the time limit, the function under
    srun); the same overtime case without that signal; a job cancelled with and without srun."""
    cases = ["sleep1", "sleep2", "raise", "overtime"]
    submitted = time.time()
    jobs = executor(folder / "cases").map_array(run_case, cases)
    print(f"array {jobs[0].job_id.split('_')[0]}: {len(jobs)} tasks submitted in {time.time() - submitted:.2f} s")
    overtime = executor(folder / "overtime", slurm_signal_delay_s=0).submit(run_case, "overtime")
    seen = wait_final(jobs, FINAL_WAIT_S)

    cancelled = {}
    for use_srun in (True, False):
        job = executor(folder / f"cancel-srun-{use_srun}", slurm_use_srun=use_srun).submit(run_case, "sleep60")
        cancelled[use_srun] = job
        print(f"job {job.job_id} (use_srun={use_srun}) cancelled: Slurm says it ended {cancel_when_running(job):.1f} s later")
    seen.update(wait_final(list(cancelled.values()), 30))
    seen.update(wait_final([overtime], FINAL_WAIT_S))

    print("\nwhat each job ended as:")
    for job, case in zip(jobs, cases):
        report(f"{case} (array)", job, submitted, seen)
    report("overtime, slurm_signal_delay_s=0", overtime, submitted, seen)
    for use_srun, job in cancelled.items():
        report(f"sleep60, cancelled, use_srun={use_srun}", job, submitted, seen)


def throughput(folder: Path, tasks: int, use_srun: bool) -> None:
    """Tasks that do nothing, as many at a time as the node has cores: the scheduler's pace."""
    ex = executor(folder / f"throughput-srun-{use_srun}", parallelism=tasks, slurm_signal_delay_s=0,
                  slurm_use_srun=use_srun)
    submitted = time.time()
    jobs = ex.map_array(run_case, ["sleep0"] * tasks)
    seen = wait_final(jobs, 600)
    done = [job for job in jobs if job.job_id in seen and job.paths.result_pickle.exists()]
    results = {job.job_id: job.result() for job in done}
    waits = [r["start"] - submitted for r in results.values()]
    lags = [seen[job_id] - r["end"] for job_id, r in results.items()]
    wall = max(seen.values()) - submitted
    print(f"throughput (use_srun={use_srun}): {len(results)}/{tasks} empty tasks in {wall:.1f} s = "
          f"{len(results) / wall:.2f} tasks/s; first start {min(waits):.2f} s after submission, "
          f"median end to result seen {statistics.median(lags):.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--throughput", type=int, default=20, help="empty tasks for the throughput figure (0: skip)")
    parser.add_argument("--skip-cases", action="store_true", help="only the throughput figure")
    args = parser.parse_args()
    slurm = subprocess.run(["sinfo", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"submitit {submitit.__version__}; {slurm}")
    with tempfile.TemporaryDirectory(prefix="slurm-smoke-") as tmp:
        if not args.skip_cases:
            cases_and_cancel(Path(tmp))
        if args.throughput:
            print()
            for use_srun in (True, False):
                throughput(Path(tmp), args.throughput, use_srun)


if __name__ == "__main__":
    main()
