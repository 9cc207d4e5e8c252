"""The memory and time of ranks forked beside the learner's code (`grader.worker.ranks`), as a
distributed exercise's probe runs them: one DDP training step of a small model on each rank, in a
sandboxed worker (a plain one where no sandbox can be made). A benchmark, not a test: it prints
figures and asserts nothing.

    python benchmarks/ranks.py                 # world sizes 2 and 4
    python benchmarks/ranks.py --world-sizes 2 4 8 --hidden 512

Per rank: its proportional set size (PSS: each shared page split among the processes sharing it)
and resident set (RSS), read from /proc at the end of its step. The ranks and the worker they were
forked from share the libraries the worker imported: the sum of their PSS is what the task's
memory cgroup is charged for them, while the sum of RSS counts every shared page once per
process. For comparison: the RSS of one fresh interpreter that imports torch and does the same
step alone, which is what each process `torchrun` starts would cost at least.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from grader.isolation import sandbox
from grader.isolation.worker_host import WorkerSpec
from grader.session.submission import BACKENDS, BackendContext, Submission
from grader.worker.loading import load_module

STEP = '''
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn


def memory_kb():
    """This process's PSS and RSS, in kB."""
    fields = {}
    with open("/proc/self/smaps_rollup") as rollup:
        for line in rollup:
            name, _, rest = line.partition(":")
            if name in ("Pss", "Rss"):
                fields[name] = int(rest.split()[0])
    return fields


def model_of(hidden, layers=4):
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Linear(hidden, hidden) for _ in range(layers)])


def ddp_step(rank, hidden):
    started = time.monotonic()
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    model = nn.parallel.DistributedDataParallel(model_of(hidden))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(16, hidden)).pow(2).mean().backward()
    optimizer.step()
    dist.barrier()
    used = memory_kb()
    dist.destroy_process_group()
    return {**used, "wall_s": time.monotonic() - started}


def alone(hidden):
    """The same step in one process, without a group (the fresh interpreter's figure)."""
    model = model_of(hidden)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(16, hidden)).pow(2).mean().backward()
    optimizer.step()
    return memory_kb()
'''

PROBES = '''
from grader.worker.ranks import describe_failures, run_ranks


def ranks_of(module, world_size, hidden):
    outcomes = run_ranks(world_size, module.ddp_step, hidden, limit_s=120)
    failed = describe_failures(outcomes)
    if failed:
        raise RuntimeError(failed)
    return {"ranks": [outcome.value for outcome in outcomes], "worker": module.memory_kb()}
'''


def fresh_interpreter_kb(step_file: Path, hidden: int) -> dict:
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(step_file.parent)!r})
        import step
        print(json.dumps(step.alone({hidden})))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--hidden", type=int, default=256, help="width of the model's four linear layers")
    args = parser.parse_args()
    level = "sandbox" if sandbox.availability()[0] else "none"
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "step.py").write_text(STEP)
        (work / "probes.py").write_text(PROBES)
        spec = WorkerSpec(level=level, writable_dirs=(work,), probe_files=(work / "probes.py",))
        backend = BACKENDS["worker"](work / "step.py", BackendContext(work, work / "worker.log", spec))
        probes = load_module(work / "probes.py")
        try:
            print(f"ranks forked in a worker at the {level} level; one DDP step of 4 x Linear({args.hidden}, "
                  f"{args.hidden}) per rank")
            print(f"{'world size':>10} {'PSS per rank MB':>16} {'RSS per rank MB':>16} {'ranks + worker PSS MB':>22} "
                  f"{'call s':>7}")
            for world_size in args.world_sizes:
                started = time.monotonic()
                got = Submission(backend, time.monotonic() + 300).probe(probes.ranks_of, world_size, args.hidden)
                took = time.monotonic() - started
                ranks = got["ranks"]
                pss = [rank["Pss"] / 1024 for rank in ranks]
                rss = [rank["Rss"] / 1024 for rank in ranks]
                print(f"{world_size:>10} {max(pss):>16.0f} {max(rss):>16.0f} "
                      f"{sum(pss) + got['worker']['Pss'] / 1024:>22.0f} {took:>7.1f}")
        finally:
            backend.close()
        alone = fresh_interpreter_kb(work / "step.py", args.hidden)
        print(f"one fresh interpreter doing the step alone (what each torchrun process costs at least): "
              f"RSS {alone['Rss'] / 1024:.0f} MB, PSS {alone['Pss'] / 1024:.0f} MB")


if __name__ == "__main__":
    main()
