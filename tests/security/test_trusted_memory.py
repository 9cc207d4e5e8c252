"""Files the learner's code writes are read by the tests in the grader's own process, which the
workers' limits do not cover: what a test reads of them must be bounded, and each task's grading
process has a memory ceiling of its own, so that a test that swells anyway ends its own task's
session, never a neighbour's. Working modules of exercises 02
and 03 that, once their real work is done, rewrite the scenario's model config to 130M parameters
(which a replay computed afterwards would build: 5.7 GB), write a 13000 x 13000 PNG whose first
header claims one pixel (which matplotlib would decode to 2.7 GB) and save an adapter config of rank 130,000 (from which peft
would build 4.8 GB of layers) must leave the grading process near its usual size."""
import sys

import pytest

from grader.course import COURSE
from grader.isolation.cgroups import Cgroup
from grader.running.pool import SESSION_DIED, PytestPool
from grader.schema.report import read_report
from grader.worker.loading import load_module, sibling_module

attacks = sibling_module(__file__, "attacks")
containers = load_module(COURSE.root / "benchmarks" / "containers.py")
harness = sibling_module(__file__, "harness")

pytestmark = [pytest.mark.skipif(harness.sandbox_skip_reason() is not None, reason=str(harness.sandbox_skip_reason())),
              pytest.mark.timeout(1800)]

BOX_MB = 3072                    # the box the flooding figure was found in
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
    # a 13000 x 13000 PNG whose first header claims one pixel: a reader of that header alone decodes 2.7 GB
    import zlib as _zlib
    def chunk(kind, body):
        return len(body).to_bytes(4, "big") + kind + body + _zlib.crc32(kind + body).to_bytes(4, "big")
    def header(side):
        return chunk(b"IHDR", side.to_bytes(4, "big") * 2 + bytes([8, 6, 0, 0, 0]))
    pack, row = _zlib.compressobj(9), bytes(1 + 4 * 13000)
    pixels = b"".join(pack.compress(row) for _ in range(13000)) + pack.flush()
    _Path(png_path).write_bytes(b"\\x89PNG\\r\\n\\x1a\\n" + header(1) + header(13000) + chunk(b"IDAT", pixels)
                                + chunk(b"IEND", b""))
    print("BOMB wrote a 13000 x 13000 PNG behind a 1 x 1 header", flush=True)
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


# The seed band's figure, once honestly drawn, given a line of 1.2 million points (3.6 MB): a reader
# that holds every point, and measures each against the curves, builds gigabytes in the grader.
FIGURE_FLOOD = '''

from pathlib import Path as _Path
_honest_seed_band = plot_seed_band


def plot_seed_band(log_paths, out_dir):
    path = _honest_seed_band(log_paths, out_dir)
    svg = _Path(path).read_text()
    flood = "M 0 0 " + "".join("L %d %d " % (i % 997, i % 991) for i in range(1_200_000))
    _Path(path).write_text(svg.replace('<g id="axes_1">', '<g id="axes_1"><g id="line2d_999"><path d="%s"/></g>' % flood, 1))
    print("BOMB drew a line of 1.2 million points", flush=True)
    return path
'''

BOMBS = {  # task: (the bombs appended to its reference, what each prints when it goes off, what the feedback says)
    "02": (TRAIN_LOOP_BOMBS, ("rewrote the scenario's model config", "wrote a 13000 x 13000 PNG"),
           ("the PNG is 13000 x 13000 pixels",)),
    "03": (LORA_SFT_BOMBS, ("claimed rank 130,000",), ("adapter_config.json",)),
    "06": (FIGURE_FLOOD, ("drew a line of 1.2 million points",), ("more than 200,000 points",)),
}


# The default tier sets off exercise 03's bomb; the full tier every one (02's grading is the longer).
@pytest.mark.parametrize("task", [pytest.param("02", marks=pytest.mark.full), "03", pytest.param("06", marks=pytest.mark.full)])
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


@pytest.mark.full
@pytest.mark.skipif(containers.unavailable() is not None, reason=str(containers.unavailable()))
def test_a_flooding_figure_costs_its_own_tests_not_a_neighbours(tmp_path):
    """The flooding figure and an honest submission, one batch, --jobs 2, in a 3 GiB box: the
    honest one keeps every point, and the flood loses the tests that read its figure, saying why."""
    task = COURSE.task_named("06")
    reference = task.reference_module.read_text(encoding="utf-8")
    attacks.course_layout(tmp_path / "flood", {"06": reference + FIGURE_FLOOD})
    attacks.course_layout(tmp_path / "honest", {"06": reference})
    out = tmp_path / "out"
    run = containers.run_in_box([sys.executable, "-m", "grader.cli", "grade", str(tmp_path / "flood"),
                                 str(tmp_path / "honest"), "--tasks", "06", "--jobs", "2", "--out-dir", str(out)],
                                BOX_MB, 2)
    honest, flood = (read_report(out / name / "score_report.json") for name in ("honest", "flood"))
    assert honest.complete and 0 < honest.total.points == honest.total.max_points, \
        (honest.total, honest.problems, run.output[-2000:])
    assert "BOMB drew a line" in (out / "flood" / "logs" / f"{task.name}.log").read_text(errors="replace")
    lost = [t for t in flood.tests() if t.lost]
    assert lost and all("more than 200,000 points" in t.feedback for t in lost), [(t.id, t.feedback[:200]) for t in lost]


SWELLING_TESTS = """
def test_swells():
    held = b"x" * (1 << 30)          # a gigabyte, every page written
    assert len(held) == 1 << 30


def test_stays_small():
    assert True
"""


def _can_make_a_memory_cgroup() -> bool:
    probe = Cgroup("probe-grading-process", 1 << 30)
    made = probe.kind is not None
    probe.kill_all()
    return made


@pytest.mark.skipif(not _can_make_a_memory_cgroup(), reason="no memory cgroup can be made here")
def test_a_grading_process_that_swells_ends_alone_at_its_own_ceiling(tmp_path):
    """A session that holds a gigabyte is ended at its own 300 MB ceiling and says so; the session
    after it in the same pool process runs; without a ceiling the same session passes."""
    (tmp_path / "test_swelling.py").write_text(SWELLING_TESTS)
    session = [str(tmp_path / "test_swelling.py"), "-q", "-p", "no:cacheprovider", "-k"]
    job = ([[*session, "swells"], [*session, "stays_small"]], tmp_path / "pool.log")
    (swelled, after), = PytestPool(1, session_memory_mb=300).run([job], limit_s=120)
    assert swelled == f"{SESSION_DIED}: ran out of its own memory (limit 300 MB)" and after == 0, (swelled, after)
    assert PytestPool(1).run([job], limit_s=120) == [[0, 0]]       # the control: the gigabyte itself is fine
