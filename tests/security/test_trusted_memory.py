"""Files the learner's code writes are read by the tests in the grader's own process, which no
sandbox limit covers: what a test reads of them must be bounded. Working modules of exercises 02
and 03 that, once their real work is done, rewrite the scenario's model config to 130M parameters
(which a replay computed afterwards would build: 5.7 GB), write a 13000 x 13000 PNG (which
matplotlib would decode to 2.7 GB) and save an adapter config of rank 130,000 (from which peft
would build 4.8 GB of layers) must leave the grading process near its usual size."""
import pytest

from grader.course import COURSE
from grader.schema.report import read_report
from grader.worker.loading import sibling_module

attacks = sibling_module(__file__, "attacks")
harness = sibling_module(__file__, "harness")

pytestmark = [pytest.mark.skipif(harness.sandbox_skip_reason() is not None, reason=str(harness.sandbox_skip_reason())),
              pytest.mark.timeout(1800)]

POOL_PEAK_LIMIT_MB = 1500        # grading the references of 02 and 03 peaks near 650 MB; the bombs reached 5.7 GB

TRAIN_LOOP_BOMBS = '''

import json as _json
from pathlib import Path as _Path
_honest_train, _honest_plot = train, plot_curves


def train(cfg):
    result = _honest_train(cfg)
    config = _Path(cfg["model_dir"]) / "config.json"
    if cfg.get("weight_decay") == 0.5 and config.is_file():       # the strong weight decay test, once
        _json.dump({**_json.loads(config.read_text()), "vocab_size": 60000, "hidden_size": 1024}, config.open("w"))
        print("BOMB rewrote the scenario's model config", flush=True)
    return result


def plot_curves(log_path, png_path):
    from PIL import Image
    Image.new("RGBA", (13000, 13000)).save(png_path)
    print("BOMB wrote a 13000 x 13000 PNG", flush=True)
'''

LORA_SFT_BOMBS = '''

import json as _json
from pathlib import Path as _Path
_honest_sft = sft_with_peft_trl


def sft_with_peft_trl(model_dir, train_path, out_dir, **kwargs):
    result = _honest_sft(model_dir, train_path, out_dir, **kwargs)
    config = _Path(out_dir) / "adapter_config.json"
    config.write_text(_json.dumps({**_json.loads(config.read_text()), "r": 130_000}))
    print("BOMB claimed rank 130,000 in the adapter config", flush=True)
    return result
'''


BOMBS = {  # task: (the bombs appended to its reference, what each prints when it goes off, what the feedback says)
    "02": (TRAIN_LOOP_BOMBS, ("rewrote the scenario's model config", "wrote a 13000 x 13000 PNG"),
           ("the PNG is 13000 x 13000 pixels",)),
    "03": (LORA_SFT_BOMBS, ("claimed rank 130,000",), ("adapter_config.json",)),
}


# The default tier sets off exercise 03's bomb; the full tier both (02's grading is the longer).
@pytest.mark.parametrize("task", [pytest.param("02", marks=pytest.mark.full), "03"])
def test_learner_files_cannot_swell_the_grading_process(tmp_path, task):
    bombs, went_off, said = BOMBS[task]
    name = COURSE.task_named(task).name
    attacks.course_layout(tmp_path / "learner", {task: COURSE.task_named(task).reference_module.read_text(encoding="utf-8")
                                                 + bombs})
    with harness.Watch(tmp_path / "tmp") as watch:
        cli = harness.run_cli(["grade", tmp_path / "learner", "--tasks", task, "--out-dir", tmp_path / "out"],
                              harness.grading_env(tmp_path), cwd=tmp_path, timeout_s=1500)
    watch.survivors()
    assert cli.returncode in (0, 1), cli.output[-2000:]
    log = (tmp_path / "out" / "learner" / "logs" / f"{name}.log").read_text(errors="replace")
    for bomb in went_off:
        assert f"BOMB {bomb}" in log, f"the bomb that {bomb} never went off: this proves nothing"
    pools = {k: v for k, v in watch.peak_mb.items() if "grader.running.pool" in k}
    assert pools and max(pools.values()) < POOL_PEAK_LIMIT_MB, pools
    feedback = " ".join(t.feedback for t in read_report(tmp_path / "out" / "learner" / "score_report.json").tests())
    assert all(words in feedback for words in said), feedback[-3000:]
