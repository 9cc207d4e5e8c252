"""A self-study learner can check every graded concept at home: each concept the hidden suite
gives points to has a visible test and a hint ladder in both languages; neither gives away a
line of the reference solution or a distinctive input of the hidden suite; the bugs learners
hit first in exercise 02, and 04's that a visible check once missed, fail the visible suite, in their own
concept, through the real grader; and a visible failure says what was expected and what came back."""
import ast
import re
import tempfile
from pathlib import Path

import pytest

from grader.course import COURSE
from grader.learning.hints import HINT_FILES as HINT_FILE_OF
from grader.learning.hints import HintFormatError, read_hints
from grader.readme import RULE_MARKER, concepts_of
from grader.running import runner
from grader.running.variants import materialize, variants_of

TASKS = [task for task in COURSE.tasks() if task.hidden_dir.is_dir()]
IDS = [task.name for task in TASKS]
HINT_FILES = (HINT_FILE_OF["en"], HINT_FILE_OF["zh-CN"])
HINTS_PER_CONCEPT = (2, 3)
# A reference line this long is code of the solution, not an idiom every file shares.
QUOTED_LINE_CHARS = 25
# Seeds 0-9 are everybody's; a larger one written in a hidden suite names that suite's inputs.
COMMON_SEEDS = range(10)
# Hidden-suite constants a README publishes, which a visible check may therefore use.
PUBLISHED = {("convergence.py", "MODEL"): "README 'Convergence' states the graded run's scaled-down model, which "
                                          "the long visible run trains too"}
# Bugs the visible suites must catch, as mutants of the hidden suites' variants.py: the four a learner
# met first in exercise 02, and 04's whose rules a visible check once left out (GPT-2's fused c_proj,
# a Mixtral's router and its k routed copies of each token).
PLANTED = {"02": ("resume_ignored", "zero_grad_per_micro_batch", "clip_after_step", "resume_truncates_log"),
           "04": ("gpt2_lora_c_proj_once", "mixtral_lora_skips_router", "mixtral_experts_not_times_k")}


# ---------------------------------------------------------------- reading suites and hints

def _constants(tree):
    return {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            for target in node.targets if isinstance(target, ast.Name) and isinstance(node.value, ast.Constant)}


def marked_tests(path: Path) -> dict[str, set[str]]:
    """{test function name: the concepts its @pytest.mark.concept markers name} of one test file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    constants, found = _constants(tree), {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            found[node.name] = {constants.get(d.args[0].id) if isinstance(d.args[0], ast.Name) else d.args[0].value
                                for d in node.decorator_list if isinstance(d, ast.Call)
                                and getattr(d.func, "attr", None) == "concept" and d.args}
    return found


def graded_concepts(task) -> set[str]:
    """The concepts that carry points: those the hidden suite's tests are marked with."""
    return {c for path in task.hidden_dir.glob("test_*.py") for concepts in marked_tests(path).values() for c in concepts}


def visible_tests(task) -> dict[str, list[str]]:
    """{concept: the visible tests marked with it}, over every test file of the exercise folder."""
    by_concept: dict[str, list[str]] = {}
    for path in sorted(task.exercise_dir.glob("test_*.py")):
        for name, concepts in marked_tests(path).items():
            for concept in concepts:
                by_concept.setdefault(concept, []).append(f"{path.name}::{name}")
    return by_concept


# ---------------------------------------------------------------- what must not be quoted

def _stripped_lines(path: Path) -> set[str]:
    return {line.strip() for line in path.read_text(encoding="utf-8").splitlines()}


def _collapsed(path: Path) -> str:
    return " ".join(path.read_text(encoding="utf-8").split())


def reference_lines(task) -> set[str]:
    """The reference's non-trivial lines, whitespace collapsed: long enough to be code of its own,
    no imports, nothing the stub or a README shows too (signatures, docstrings, constants, the calls
    a README spells out)."""
    reference = task.reference_module
    public = _stripped_lines(task.exercise_dir / f"{task.module}.py")
    readmes = " ".join(_collapsed(path) for path in task.exercise_dir.glob("README*.md"))
    lines = {" ".join(line.split()) for line in _stripped_lines(reference) - public
             if len(line) >= QUOTED_LINE_CHARS and not line.startswith(("import ", "from ", "#"))}
    return {line for line in lines if line not in readmes}


def learner_facing_files(task) -> list[Path]:
    """What a learner receives besides the stub and the README: visible tests, probes, hints."""
    return sorted([*task.exercise_dir.glob("test_*.py"), *task.exercise_dir.glob("probes.py"),
                   *(task.exercise_dir / name for name in HINT_FILES)])


def _literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict" and not node.args:
            try:
                return {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            except (ValueError, TypeError, SyntaxError):
                return None
        return None


def _leaves(value):
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _distinctive(value) -> bool:
    """An input, not a convention: a container of at least three values holding a number, that is
    not a tolerance (rtol/atol)."""
    if not isinstance(value, (dict, list, tuple)) or (isinstance(value, dict) and set(value) <= {"rtol", "atol"}):
        return False
    leaves = _leaves(value)
    return len(leaves) >= 3 and any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in leaves)


def _container_literals(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple, ast.Dict)) or (
                isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict"):
            value = _literal(node)
            if value is not None and _distinctive(value):
                yield node, value


def _seeds(tree) -> set[int]:
    """The integer seeds a file passes to manual_seed, default_rng, Random or a `seed=` argument."""
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        values = node.args[:1] if name in ("manual_seed", "default_rng", "Random", "seed") else []
        values += [k.value for k in node.keywords if k.arg == "seed"]
        found |= {v.value for v in values if isinstance(v, ast.Constant) and type(v.value) is int}
    return found


def hidden_inputs(task) -> tuple[list, set[int]]:
    """The hidden suite's distinctive literal inputs (named module-level containers) and seeds."""
    values, seeds = [], set()
    for path in task.hidden_dir.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        seeds |= _seeds(tree)
        for node in tree.body:
            if isinstance(node, ast.Assign):
                value = _literal(node.value)
                name = ast.unparse(node.targets[0])
                if value is not None and _distinctive(value) and (path.name, name) not in PUBLISHED:
                    values.append((path.name, name, value))
    return values, seeds - set(COMMON_SEEDS)


# ---------------------------------------------------------------- how a failure reads

COMPARISONS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
CLOSENESS = {"close", "isclose", "allclose"}


def compares_values(test: ast.expr) -> bool:
    """An assert's test that compares values: a comparison, or a closeness check, alone or in
    and/or/not."""
    if isinstance(test, ast.BoolOp):
        return any(compares_values(value) for value in test.values)
    if isinstance(test, ast.UnaryOp):
        return compares_values(test.operand)
    if isinstance(test, ast.Compare):
        return any(isinstance(op, COMPARISONS) for op in test.ops)
    if isinstance(test, ast.Call):
        return getattr(test.func, "attr", getattr(test.func, "id", "")) in CLOSENESS
    return False


def _words(node: ast.AST) -> str:
    return " ".join(n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def number_style_breaks(message: ast.expr) -> list[str]:
    """What a message formats its own way: `!r` (NumPy's repr, `np.float64(0.5)`, where the
    learner wrote 0.5: `grader.suite.checks.shown` gives the value as written) and thousands
    separators (`74,560` beside a plain `82752`)."""
    found = []
    for node in ast.walk(message):
        if isinstance(node, ast.FormattedValue):
            if node.conversion == ord("r"):
                found.append("!r")
            if node.format_spec is not None and "," in _words(node.format_spec):
                found.append(":,")
    return found


def message_breaks(path: Path) -> list[str]:
    """Each assert or raise of a visible test file whose message breaks the rules: a comparison
    whose message does not say what was expected and what the learner's code gave, values
    formatted in a style of their own."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        breaks = []
        if isinstance(node, ast.Assert):
            said = set(re.findall(r"\w+", _words(node.msg))) if node.msg is not None else set()
            if compares_values(node.test) and not {"expected", "got"} <= said:
                breaks.append("no 'expected ..., got ...'")
            breaks += number_style_breaks(node.msg) if node.msg is not None else []
        elif isinstance(node, ast.Raise) and node.exc is not None:
            breaks += number_style_breaks(node.exc)
        if breaks:
            found.append(f"{path.name}:{node.lineno}: {', '.join(breaks)}")
    return found


# ---------------------------------------------------------------- the checks

@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_every_graded_concept_has_a_visible_check(task):
    concepts, visible = graded_concepts(task), visible_tests(task)
    assert concepts, f"{task.name}: the hidden suite marks no concept"
    missing = sorted(concepts - set(visible))
    assert not missing, f"{task.name}: graded concepts without a visible test: {missing}"


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_visible_checks_are_worth_little_and_say_what_they_check(task):
    """Each visible test is worth 0.5 or 1 point, has a time limit sized to it, and a docstring."""
    for path in task.exercise_dir.glob("test_*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                marks = {d.func.attr: d.args for d in node.decorator_list
                         if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute)}
                where = f"{path.name}::{node.name}"
                assert [a.value for a in marks.get("points", [])] in ([0.5], [1]), f"{where}: points 0.5 or 1"
                assert marks.get("timeout"), f"{where} declares no @pytest.mark.timeout"
                assert ast.get_docstring(node), f"{where} has no docstring saying what it checks"


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_every_graded_concept_has_a_hint_ladder_in_both_languages(task):
    english, chinese = (read_hints(task.exercise_dir / name) for name in HINT_FILES)
    assert list(english[1]) == list(chinese[1]), \
        f"{task.name}: the two hint files have other sections ({list(english[1])} / {list(chinese[1])})"
    sections = concepts_of(task)
    unknown = [s for s in english[1] if s not in sections]
    assert not unknown, f"{task.name}: hint sections that are no README.md section: {unknown}"
    assert [s for s in sections if s in english[1]] == list(english[1]), f"{task.name}: hints out of README order"
    missing = sorted(graded_concepts(task) - set(english[1]))
    assert not missing, f"{task.name}: graded concepts without hints: {missing}"
    low, high = HINTS_PER_CONCEPT
    for (_title, hints), language in ((english, "en"), (chinese, "zh-CN")):
        for section, ladder in hints.items():
            assert low <= len(ladder) <= high, f"{task.name} ({language}) {section!r}: {len(ladder)} hints"
    for section, ladder in chinese[1].items():
        assert all(re.search(r"[\u4e00-\u9fff]", hint) for hint in ladder), \
            f"{task.name}: a Chinese hint of {section!r} holds no Chinese"


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_visible_checks_and_hints_quote_no_reference_line(task):
    secret = reference_lines(task)
    assert secret, f"{task.name}: no reference line to look for"
    for path in learner_facing_files(task):
        text = _collapsed(path)
        quoted = sorted(line for line in secret if line in text)
        assert not quoted, f"{path.relative_to(COURSE.exercises)} quotes the reference: {quoted[:3]}"


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_visible_checks_use_no_distinctive_hidden_input(task):
    values, seeds = hidden_inputs(task)
    for path in task.exercise_dir.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node, value in _container_literals(tree):
            same = [f"{file}:{name}" for file, name, hidden in values if hidden == value]
            assert not same, f"{path.name}:{node.lineno} holds the hidden suite's input {same[0]}"
        shared = sorted(_seeds(tree) & seeds)
        assert not shared, f"{path.name} seeds with {shared}, as the hidden suite does"


def test_the_checks_see_what_they_look_for(tmp_path):
    """The readers above find a planted hint-format slip, a quoted reference line and a hidden seed."""
    task = COURSE.task_named("02")
    (tmp_path / "hints.md").write_text("# Hints\n\n## Clipping\n\n1. one\n3. three\n")
    with pytest.raises(HintFormatError):
        read_hints(tmp_path / "hints.md")
    line = sorted(reference_lines(task))[0]
    assert line in " ".join(f"x = 1\n    {line}\n".split())
    values, _ = hidden_inputs(task)
    file, name, value = values[0]
    planted = ast.parse(f"CONFIG = {value!r}")
    assert [found for _, found in _container_literals(planted)] == [value], f"{file}:{name} not found again"
    assert _seeds(ast.parse("torch.manual_seed(1234)\nrandom.Random(seed=77)")) == {1234, 77}


@pytest.fixture(scope="module")
def planted_gradings(tmp_path_factory):
    """A task's planted bugs graded with the visible suite only, through the grader, in one batch
    with the reference: `planted_gradings("02")`, graded once per task however many tests ask."""
    graded = {}

    def of(task_name: str):
        if task_name not in graded:
            task, names = COURSE.task_named(task_name), PLANTED[task_name]
            variants = {v.name: v for v in variants_of(task) if v.name in names}
            assert sorted(variants) == sorted(names), f"a planted bug of {task.name} is missing from variants.py"
            root = tmp_path_factory.mktemp("planted")
            jobs = [runner.GradingRun(materialize(task, variants[name], root), [task], hidden=False) for name in names]
            jobs.append(runner.GradingRun(COURSE.solutions, [task], hidden=False))        # the control: loses nothing
            graded[task_name] = task, variants, dict(zip([*names, "reference"], runner.run_many(jobs, 2)))
        return graded[task_name]
    return of


# Full tier (the two below): visible suites against their planted bugs, content the full audit also
# grades; the default tier grades visible suites through the same runner elsewhere.
@pytest.mark.e2e
@pytest.mark.full
@pytest.mark.timeout(900)
@pytest.mark.parametrize("task_name", list(PLANTED))
def test_the_reference_loses_no_visible_point_in_the_same_batch(planted_gradings, task_name):
    task, _, reports = planted_gradings(task_name)
    result = reports["reference"].task(task.name)
    assert result and result.points == result.max_points, [t.id for t in result.tests if t.lost]


@pytest.mark.e2e
@pytest.mark.full
@pytest.mark.timeout(900)
@pytest.mark.parametrize("task_name, name", [(task, name) for task, names in PLANTED.items() for name in names])
def test_a_planted_bug_fails_a_visible_check_of_its_concept(planted_gradings, task_name, name):
    task, variants, reports = planted_gradings(task_name)
    report = reports[name]
    assert report.complete, f"{name}: the grading was incomplete: {report.problems}"
    result = report.task(task.name)
    lost = sorted({t.concept for t in result.tests if t.lost})
    assert variants[name].concept in lost, \
        f"{name} ({variants[name].note}) loses visible points in {lost}, not in {variants[name].concept!r}"
    assert all(t.suite == "visible" for t in result.tests)


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_rule_markers_end_their_line(task):
    """Read raw, a README keeps its sentences whole: every rule marker ends its line (in a table, its cell)."""
    for path in sorted(task.exercise_dir.glob("README*.md")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for marker in RULE_MARKER.finditer(line):
                after = line[marker.end():].strip()
                assert after in ("", "|") and line[:marker.start()].strip(), \
                    f"{path.name}:{number}: {marker.group(0)} sits inside the line: {line.strip()[:80]}"


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_visible_failures_say_expected_against_got_in_one_number_style(task):
    """Every visible check that compares values fails with what was expected and what came back,
    each value written as the learner would write it."""
    found = [line for path in sorted(task.exercise_dir.glob("test_*.py")) for line in message_breaks(path)]
    assert not found, f"{task.name}: {len(found)} messages to fix:\n" + "\n".join(found)


def test_the_message_rules_see_what_they_look_for():
    """The rules' control: messages that break them are found, one that keeps them is not."""
    def breaks(source: str) -> list[str]:
        path = Path(tempfile.mkdtemp()) / "test_x.py"
        path.write_text(source, encoding="utf-8")
        return message_breaks(path)
    assert breaks("assert a == b, f'a is {a}'\n") == ["test_x.py:1: no 'expected ..., got ...'"]
    assert breaks("assert close(a, b) and c, f'expected {b}, got {a!r}'\n") == ["test_x.py:1: !r"]
    assert breaks("raise AssertionError(f'expected {b:,}, got {a}')\n") == ["test_x.py:1: :,"]
    assert breaks("assert not a < b, f'f(1): expected {shown(b)}, got {shown(a)}'\nassert a, 'no values'\n") == []


# How a README names "the map" ("a linear map" is mathematics, not the map), and the words it explains
# the map with at its first mention: part of the course's source material, which a release does not hold.
MAP_WORDS = {"README.md": (re.compile(r"\b[Tt]he (?:[\w-]+ )?map\b"), "source material"),
             "README.zh-CN.md": (re.compile("地图"), "原始材料")}
MAP_EXPLAINED_WITHIN = 250       # characters after the first mention


def map_unexplained(text: str, readme: str) -> bool:
    """Whether `text` names the map before saying what it is: its first mention (whitespace
    collapsed) is not followed within MAP_EXPLAINED_WITHIN characters by the words that explain it."""
    mention, explanation = MAP_WORDS[readme]
    flat = " ".join(text.split())
    first = mention.search(flat)
    return first is not None and explanation not in flat[first.start():first.start() + MAP_EXPLAINED_WITHIN]


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_each_readme_says_what_the_map_is_where_it_first_names_it(task):
    """A release holds the exercises, not the course's source material: a README that speaks of
    "the map" says what it is at its first mention, in both languages."""
    unexplained = [name for name in MAP_WORDS if map_unexplained((task.exercise_dir / name).read_text(encoding="utf-8"), name)]
    assert not unexplained, f"{task.name}: {unexplained} name the map before saying what it is"


def test_the_map_rule_sees_what_it_looks_for():
    assert map_unexplained("The map pairs this question with exercise 01's.", "README.md")
    assert not map_unexplained("The map (the L1 tools map, the course's source\nmaterial) pairs it.", "README.md")
    assert map_unexplained("地图把这个问题和练习 01 配成一对。", "README.zh-CN.md")
    assert not map_unexplained("one adapter per linear map; nothing else named", "README.md")
