"""The one-node Slurm of `.ci/slurm-up`, driven through submitit the way a grading job is: an
array's results come back, and a job ended from outside (cancelled, past its time limit, out
of memory) ends in the state Slurm names for it. Skips with the script's reason where Slurm
cannot be started here.

Without an accounting database sacct knows no job, so submitit's own `job.state` is UNKNOWN
and `job.result()` would wait for ever on a job that wrote no result: these tests read a job's
state from squeue (which remembers a finished job for MinJobAge seconds) and wait on their own.
Only standard-library functions are submitted: they unpickle in the job by reference.
"""
import math
import operator
import subprocess
import time
from datetime import datetime

import pytest

submitit = pytest.importorskip("submitit", reason="submitit is not installed (pip install -e '.[test]')")

FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED"}
# A short job ends about 2 s after submission (a second to be scheduled, one to start Python);
# the rest is room for a busy machine.
SHORT_JOB_S = 20
# Slurm checks time limits every 30 s; the kill, SIGTERM then SIGKILL, takes a few more.
TIME_LIMIT_CHECK_S = 45


@pytest.fixture
def executor(slurm, tmp_path):       # `slurm`: tests/conftest.py
    """Each job asks for one core and a little memory, as a grading job does. submitit's
    defaults are changed twice: its USR2 'time is nearly up' signal, 90 s before the limit by
    default, would stop a one-minute job at Slurm's first time check (submitit turns it into
    a failure); and the function runs in the batch script, not under srun, whose step takes
    another 6 s to die when the job is cancelled."""
    ex = submitit.AutoExecutor(folder=tmp_path / "jobs", cluster="slurm")
    ex.update_parameters(timeout_min=1, mem_gb=0.25, cpus_per_task=1, slurm_array_parallelism=2,
                         slurm_signal_delay_s=0, slurm_use_srun=False)
    return ex


def slurm_state(job) -> str:
    out = subprocess.run(["squeue", "-h", "-t", "all", "-j", job.job_id, "-o", "%T"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def wait_for_state(job, states, limit_s: float) -> str:
    deadline = time.monotonic() + limit_s
    state = slurm_state(job)
    while state not in states and time.monotonic() < deadline:
        time.sleep(0.2)
        state = slurm_state(job)
    return state


def started(job) -> None:
    assert wait_for_state(job, {"RUNNING"} | FINAL_STATES, SHORT_JOB_S) == "RUNNING"


def test_an_array_returns_every_result(executor):
    bases = list(range(6))
    jobs = executor.map_array(pow, bases, [2] * len(bases))
    assert len({job.job_id.split("_")[0] for job in jobs}) == 1, "one array, not one job per task"
    for job in jobs:
        assert wait_for_state(job, FINAL_STATES, SHORT_JOB_S * 2) == "COMPLETED"
    assert [job.result() for job in jobs] == [0, 1, 4, 9, 16, 25]


def test_a_raised_exception_fails_the_job_and_comes_back_with_its_trace(executor):
    job = executor.submit(math.sqrt, -1)
    assert wait_for_state(job, FINAL_STATES, SHORT_JOB_S) == "FAILED"
    with pytest.raises(submitit.core.utils.FailedJobError, match="ValueError: math domain error"):
        job.result()


def test_a_cancelled_job_ends_cancelled_with_no_result(executor):
    job = executor.submit(time.sleep, 120)
    started(job)
    job.cancel()
    assert wait_for_state(job, FINAL_STATES, SHORT_JOB_S) == "CANCELLED"
    assert not job.paths.result_pickle.exists()


@pytest.mark.full       # Slurm checks time limits every 30 s: the default tier's jobs end by themselves or are cancelled
def test_a_job_past_its_time_limit_ends_timeout(executor):
    job = executor.submit(time.sleep, 300)
    started(job)
    # Slurm's shortest time limit is a minute: the running job's end is moved to now instead,
    # and Slurm's own time-limit check kills it. Never before the job's start, which Slurm refuses
    # ("Invalid time specified"): its clock may have started the job in the second after ours.
    start = subprocess.run(["squeue", "-h", "-j", job.job_id, "-o", "%S"], capture_output=True, text=True,
                           check=True).stdout.strip()
    end = max(datetime.now().strftime("%Y-%m-%dT%H:%M:%S"), start)       # both ISO 8601: ordered as text
    subprocess.run(["scontrol", "update", f"JobId={job.job_id}", f"EndTime={end}"], check=True)
    assert wait_for_state(job, FINAL_STATES, TIME_LIMIT_CHECK_S) == "TIMEOUT"
    assert not job.paths.result_pickle.exists()


def proctrack() -> str:
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    return next(line.split("=", 1)[1].strip() for line in config.splitlines() if line.startswith("ProctrackType"))


def test_a_job_over_its_memory_is_killed(executor):
    executor.update_parameters(mem_gb=0.2)
    job = executor.submit(operator.mul, b"x", 500 * 2**20)   # 500 MB, every page written
    state = wait_for_state(job, FINAL_STATES, SHORT_JOB_S)
    if proctrack() == "proctrack/cgroup":
        assert state == "OUT_OF_MEMORY"   # the kernel's cgroup limit killed it
    else:
        # slurmstepd, polling the job's memory each second, killed it; Slurm calls that a failure.
        assert state == "FAILED"
        assert "Exceeded job memory limit" in job.stderr()
    assert not job.paths.result_pickle.exists()
