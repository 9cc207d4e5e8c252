"""What the learner's code returns is data, never a verdict. A path it returns is read by the test
as the grader's user, who may read what the learner may not (another learner's run record, the
course, `/dev/zero`): exercise 02's `train` returns the paths of its run record and checkpoint,
here naming a file outside the test's folder that holds a secret, which must not reach the
learner's report. A number it reports about itself proves nothing either: a `train` that trains
nothing and reports the loss the convergence test asks for must not pass that test."""
import json

import pytest

from grader.schema.report import read_report
from grader.worker.loading import sibling_module

attacks = sibling_module(__file__, "attacks")
harness = sibling_module(__file__, "harness")

pytestmark = [pytest.mark.skipif(harness.sandbox_skip_reason() is not None, reason=str(harness.sandbox_skip_reason())),
              pytest.mark.timeout(900)]

FORGED_TRAIN = '''

def train(cfg):
    """No training: the model is built as the contract says, and the loss reported is read off the eval file."""
    import json
    from transformers import AutoConfig, AutoModelForCausalLM
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(cfg["model_dir"]))
    documents = [json.loads(line) for line in open(cfg["eval_path"]) if line.strip()]
    floor = sum(d.get("source_nll", 0.0) for d in documents) / sum(len(d["input_ids"]) - 1 for d in documents)
    return {"log": [], "eval": [], "final_eval_loss": floor + 0.1, "checkpoint": None, "record": None}
'''

FAKE_TRAIN = '''

def train(cfg):
    """Three steps' worth of a log that depends on the seed, and someone else's files as its own."""
    log = [{"step": 1, "loss": 1.0 + cfg.get("seed", 0), "lr": 0.1, "grad_norm": 0.0, "tokens": 1}]
    return {"log": log, "eval": [], "final_eval_loss": 0.0, "checkpoint": %(path)r, "record": %(path)r}
'''


def grade_exercise_02(tmp_path, train_source: str):
    """Grade the exercise-02 stub with `train` replaced; the path of its score report."""
    return attacks.grade_stub_with(tmp_path, "02", train_source) / "learner" / "score_report.json"


def test_a_returned_path_outside_the_tests_folder_is_never_read(tmp_path):
    marker = harness.new_marker()
    secret = tmp_path / "someone-elses-run.json"
    secret.write_text(json.dumps({"run_id": marker, "config": {}, "metrics": {"tokens": 1}}))
    secret.chmod(0o600)
    report_path = grade_exercise_02(tmp_path, FAKE_TRAIN % {"path": str(secret)})
    report_text = report_path.read_text()
    assert marker not in report_text, "the secret behind a returned path reached the learner's report"
    feedback = [t.feedback for t in read_report(report_path).tests()]
    refused = [f for f in feedback if "is not inside the folder the test gave your code" in (f or "")]
    assert refused, "no test read the returned path, so this proves nothing:\n" + "\n".join(map(str, feedback))


@pytest.mark.full       # returned paths are attacked in the default tier by a path outside the tests' folder
def test_a_reported_loss_without_training_earns_nothing(tmp_path):
    tests = read_report(grade_exercise_02(tmp_path, FORGED_TRAIN)).tests()
    convergence = next(t for t in tests if t.id.endswith("test_from_scratch_run_approaches_the_corpus_floor"))
    assert convergence.status == "failed", f"{convergence.status}: {convergence.feedback}"
    assert "your final model's eval loss is" in convergence.feedback, convergence.feedback
    assert sum(t.points for t in tests) == 0
