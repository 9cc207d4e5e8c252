"""A replay attack on exercise 04, graded through the real CLI: a module with no implementation
that answers from a table of arguments and results recorded in earlier gradings earns none of
the points whose inputs come from the grading's seed.

The feedback of a hidden test shows expected against got on purpose, so a learner can collect
what the suite asks and what it wants. Here the collection is perfect: a *recorder* (the
reference, each public function wrapped to print `REPLAY <function> <key> <result as JSON>` to
its worker's log, the key a sha256 of its arguments as canonical JSON) is graded, and a
*replayer* (every function looks its arguments up in the recorded table and returns the result,
else raises NotImplementedError) is graded after it. Official grading draws each submission's
seed from the course secret and the module's digest, so the replayer, another module, meets other
inputs: it earns nothing on a test that draws from the seed.

What stays replayable rests on public facts, never on hidden inputs: the visible tests (10
points: the learner has their source) and the hidden `test_map_*` tests (8 points: the source
map's figures for Llama-3-8B on an H100, which the README prints). The control proves the test
can fail: with `--seed 0` forced on both gradings, the replayer earns the recorded points.
"""
import hashlib
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader.course import COURSE, locate_module
from grader.schema.report import read_report
from grader.worker.loading import sibling_module

harness = sibling_module(__file__, "harness")

pytestmark = [pytest.mark.timeout(600)]

TASK = COURSE.task_named("04")
MODULE = locate_module(COURSE.solutions, TASK).name
PUBLIC_FACT_TESTS = re.compile(r"^test_map_")     # hidden tests whose fixed inputs are the source map's
CLI_LIMIT_S = 400
RECORD = re.compile(r"^REPLAY (\w+) ([0-9a-f]{64}) (.*)$")


def key_of(args, kwargs) -> str:
    return hashlib.sha256(json.dumps([args, kwargs], sort_keys=True).encode()).hexdigest()


RECORDER_WRAPPER = '''

import functools as _functools
import hashlib as _hashlib
import inspect as _inspect
import json as _json


def _recorded(name, function):
    @_functools.wraps(function)
    def recorder(*args, **kwargs):
        result = function(*args, **kwargs)
        key = _hashlib.sha256(_json.dumps([list(args), kwargs], sort_keys=True).encode()).hexdigest()
        print("REPLAY", name, key, _json.dumps(result), flush=True)
        return result
    return recorder


for _name, _function in list(globals().items()):
    if _inspect.isfunction(_function) and not _name.startswith("_") and _function.__module__ == __name__:
        globals()[_name] = _recorded(_name, _function)
'''

REPLAYER = '''"""No implementation: every answer comes from a table recorded in earlier gradings."""
import hashlib
import json

TABLE = json.loads({table!r})


def _replay(name, args, kwargs):
    key = hashlib.sha256(json.dumps([list(args), kwargs], sort_keys=True).encode()).hexdigest()
    if name + " " + key in TABLE:
        return TABLE[name + " " + key]
    raise NotImplementedError(f"{{name}}: these arguments were never recorded")

{functions}
'''


def public_functions() -> list[str]:
    source = locate_module(COURSE.solutions, TASK).read_text(encoding="utf-8")
    return re.findall(r"^def ([a-z]\w*)\(", source, flags=re.MULTILINE)


def replayer_source(table: dict) -> str:
    functions = "\n".join(f"\ndef {name}(*args, **kwargs):\n    return _replay({name!r}, args, kwargs)\n"
                          for name in public_functions())
    return REPLAYER.format(table=json.dumps(table), functions=functions)


def submission(folder: Path, source: str) -> Path:
    module = folder / TASK.name / MODULE
    module.parent.mkdir(parents=True)
    module.write_text(source, encoding="utf-8")
    return folder


def grade(work: Path, tree: Path, out: Path, seed: int | None):
    args = ["grade", tree, "--tasks", TASK.name, "--out-dir", out] + ([] if seed is None else ["--seed", seed])
    cli = harness.run_cli(args, harness.grading_env(work), cwd=work, timeout_s=CLI_LIMIT_S)
    assert cli.returncode in (0, 1), cli.output[-3000:]
    folder = out / tree.name
    log = folder / "logs" / f"{TASK.name}.log"
    return read_report(folder / "score_report.json"), log.read_text(errors="replace") if log.exists() else ""


def recorded(log: str) -> dict:
    table = {}
    for line in log.splitlines():
        match = RECORD.match(line)
        if match:
            table[f"{match[1]} {match[2]}"] = json.loads(match[3])
    return table


def seed_dependent(test) -> bool:
    """Whether a test's inputs come from the grading's seed: every hidden test but the map's facts."""
    return test.suite == "hidden" and not PUBLIC_FACT_TESTS.match(test.id.split("::")[-1])


def points(report, which) -> float:
    return sum(t.points for t in report.tests() if t.graded and which(t))


def figures(name: str, report) -> str:
    return (f"{name} (seed {report.run['seed']}): {report.total.points:g} / {report.total.max_points:g} points, "
            f"{points(report, seed_dependent):g} of them on tests that draw from the seed")


@pytest.fixture(scope="module")
def gradings(tmp_path_factory, request):
    """The recorder graded with its own seed and with --seed 0, then one replayer holding both
    tables graded the same two ways (each pair at once, on the two cores)."""
    if harness.sandbox_skip_reason() and harness.level_skip_reason("uid"):
        pytest.skip(harness.sandbox_skip_reason())
    work = tmp_path_factory.mktemp("replay")
    reference = locate_module(COURSE.solutions, TASK).read_text(encoding="utf-8")
    recorder = submission(work / "recorder", reference + RECORDER_WRAPPER)
    with ThreadPoolExecutor(2) as pool:
        own, forced = pool.map(lambda args: grade(work, *args),
                               [(recorder, work / "out-own", None), (recorder, work / "out-seed-0", 0)])
    table = {**recorded(own[1]), **recorded(forced[1])}
    replayer = submission(work / "replayer", replayer_source(table))
    with ThreadPoolExecutor(2) as pool:
        replayed_own, replayed_forced = pool.map(lambda args: grade(work, *args),
                                                 [(replayer, work / "replay-own", None),
                                                  (replayer, work / "replay-seed-0", 0)])
    found = {"recorder": own[0], "recorder_seed_0": forced[0], "table": table,
             "replayer": replayed_own[0], "replayer_seed_0": replayed_forced[0]}
    harness.show(request, f"replay attack on exercise 04 ({len(table)} calls recorded): "
                          + "; ".join(figures(name, found[name]) for name in
                                      ("recorder", "replayer", "recorder_seed_0", "replayer_seed_0")))
    return found


def test_the_recorder_scores_full_marks_and_records_every_call(gradings):
    for name in ("recorder", "recorder_seed_0"):
        report = gradings[name]
        assert report.total.points == report.total.max_points, \
            [(t.id, t.feedback) for t in report.tests() if t.lost]
    assert len(gradings["table"]) > 200, f"only {len(gradings['table'])} calls were recorded"


def test_each_submission_is_graded_with_a_seed_of_its_own(gradings):
    seeds = {name: (gradings[name].run["seed"], gradings[name].run["config"]["seed_from"])
             for name in ("recorder", "replayer", "recorder_seed_0", "replayer_seed_0")}
    assert seeds["recorder"][0] != seeds["replayer"][0], seeds
    assert seeds["recorder"][1] == seeds["replayer"][1] != "--seed", seeds
    assert seeds["recorder_seed_0"][0] == seeds["replayer_seed_0"][0] == 0, seeds


def test_the_replayer_earns_nothing_that_comes_from_the_seed(gradings):
    report = gradings["replayer"]
    earned = [(t.id.split("::")[-1], t.points) for t in report.tests() if t.graded and seed_dependent(t) and t.points]
    assert not earned, f"the replayer earned points on tests that draw from the seed: {earned}"
    public = points(gradings["recorder"], lambda t: not seed_dependent(t))
    assert report.total.points <= public, (report.total.points, public)


def test_with_one_seed_for_both_the_replayer_earns_the_recorded_points(gradings):
    """The control: a seed shared by both gradings hands the replayer what the recorder earned."""
    recorded_points = points(gradings["recorder_seed_0"], seed_dependent)
    replayed = points(gradings["replayer_seed_0"], seed_dependent)
    assert replayed >= 0.9 * recorded_points, (replayed, recorded_points)
