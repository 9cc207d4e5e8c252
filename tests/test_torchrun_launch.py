"""Exercise 07's torchrun probe: torch's gloo can hang a rank's exit, rarely, after its group was
destroyed while a DDP model still lived (about 1 launch in 40 with correct code on torch 2.13). A
launch whose ranks outlive the checkpoint by the grace period is run once more; a learner whose
ranks never exit hangs again and is reported, with the time it took bounded by the launch's limit."""
import types

import pytest
import torch

from grader.course import COURSE
from grader.worker.loading import load_module

probes = load_module(COURSE.exercises / "07_distributed" / "probes.py")
REFERENCE = (COURSE.solutions / "07_distributed" / "distributed.py").read_text(encoding="utf-8")
SHUTDOWN = "    finally:\n        shutdown()\n"
START = "    init_distributed()\n"
TINY_LLAMA = {"vocab_size": 64, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 16}


def launch(tmp_path, source: str) -> dict:
    module = tmp_path / "distributed.py"
    module.write_text(source)
    out = tmp_path / "out"
    out.mkdir()
    data = {"config": TINY_LLAMA, "seed": 1, "steps": 1, "batch_size": 1, "lr": 1e-3,
            "samples": torch.randint(0, TINY_LLAMA["vocab_size"], (2, 6)).tolist()}
    return probes.launched(types.SimpleNamespace(__file__=str(module)), data, str(out), 2, 200)


@pytest.mark.timeout(300)
def test_a_launch_that_hangs_at_exit_once_is_run_again_and_passes(tmp_path):
    assert SHUTDOWN in REFERENCE and START in REFERENCE
    # Each rank knows when it starts whether it ran before: what its first run does at the end
    # cannot keep its second from knowing.
    hangs_the_first_time = REFERENCE.replace(START, (
        "    marker = Path(args.out) / f'started-{os.environ[\"RANK\"]}'\n"
        "    first_launch = not marker.exists()\n"
        "    marker.touch()\n") + START).replace(SHUTDOWN, SHUTDOWN + (
        "        if first_launch:\n"
        "            import time; time.sleep(1000)\n"))
    run = launch(tmp_path, hangs_the_first_time)
    assert (run["status"], run["launches"], len(run["log"])) == (0, 2, 1), run["printed"]


@pytest.mark.timeout(300)
def test_ranks_that_never_exit_are_reported_after_two_launches(tmp_path):
    never_exits = REFERENCE.replace(SHUTDOWN, SHUTDOWN + "        import time; time.sleep(1000)\n")
    run = launch(tmp_path, never_exits)
    assert (run["status"], run["launches"]) == (None, 2)
    assert f"still running {probes.EXIT_GRACE_S} s after the checkpoint was written, in 2 launches" in run["printed"]
