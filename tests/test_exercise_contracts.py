"""Every exercise keeps its promises: one API shared by stub and reference, a stub that fails
loudly with a pointer into its README, tests that declare points and a concept the README
(English and Chinese) has a section for, and variants that still apply to the reference."""
import ast
import inspect
import re

import pytest

from grader.course import COURSE, learner_modules
from grader.readme import GRADED_CHECKS, concepts_of, graded_checks, marked_rules, rules_of
from grader.running.variants import INDEPENDENT, REFERENCE, base_source, variants_of
from grader.worker.loading import load_module

TASKS = COURSE.tasks()
IDS = [t.name for t in TASKS]


def carries(chinese_heading: str, english: str) -> bool:
    """A Chinese heading names its English section in parentheses, ASCII or full-width."""
    return f"({english})" in chinese_heading or f"（{english}）" in chinese_heading


def public_functions(path):
    module = load_module(path)
    return {name: obj for name, obj in vars(module).items()
            if inspect.isfunction(obj) and obj.__module__ == module.__name__ and not name.startswith("_")}


def test_every_exercise_folder_is_a_task():
    folders = [d for d in COURSE.exercises.iterdir() if d.is_dir() and d.name[:2].isdigit()]
    assert folders and len(folders) == len(TASKS), \
        {d.name: learner_modules(d) for d in folders if d.name not in {t.name for t in TASKS}}


def test_the_suites_keep_no_conftest_that_a_grading_would_leave_out():
    """A course session runs with --noconftest (`Course.session_options`), so that the
    project's own tests/conftest.py, above the hidden suites, never runs in a grading: a suite's
    own conftest.py would be left out as silently."""
    assert "--noconftest" in COURSE.session_options()
    found = [str(p) for root in (COURSE.exercises, COURSE.hidden) for p in root.rglob("conftest.py")]
    assert not found, f"the suites' helpers belong in their probes or modules, not in a conftest: {found}"


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_stub_and_reference_share_one_api(task):
    stub = public_functions(task.exercise_dir / f"{task.module}.py")
    reference = public_functions(task.reference_module)
    assert sorted(stub) == sorted(reference)
    for name in stub:
        assert inspect.signature(stub[name]) == inspect.signature(reference[name]), name
        assert inspect.getdoc(stub[name]) == inspect.getdoc(reference[name]), name
        assert inspect.getdoc(stub[name]), f"{name} has no docstring"


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_stub_functions_point_into_the_readme(task):
    sections = concepts_of(task)
    source = (task.exercise_dir / f"{task.module}.py").read_text()
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            raised = ast.get_source_segment(source, node.body[-1])
            match = re.search(r'NotImplementedError\(.*section "([^"]+)"', raised or "")
            assert match, f"{node.name} must end with raise NotImplementedError('see README.md, section \"...\"')"
            assert match.group(1) in sections, f"{node.name} points to a missing README section {match.group(1)!r}"


def graded_tests(task):
    """(file, test name, points, concept) for every test function of the task's suites."""
    files = [*task.exercise_dir.glob("test_*.py"), *(COURSE.hidden / task.name).glob("test_*.py")]
    for path in files:
        tree = ast.parse(path.read_text())
        constants = {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                     for target in node.targets if isinstance(target, ast.Name)
                     and isinstance(node.value, ast.Constant)}

        def value(node, constants=constants):
            return constants.get(node.id) if isinstance(node, ast.Name) else ast.literal_eval(node)

        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                marks = {d.func.attr: d.args for d in node.decorator_list
                         if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute)}
                points, concept = marks.get("points", [None])[0], marks.get("concept", [None])[0]
                yield path.name, node.name, points and value(points), concept and value(concept)


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_every_test_declares_points_and_a_readme_concept(task):
    english = concepts_of(task)
    chinese = " ".join(concepts_of(task, "zh-CN"))
    tests = list(graded_tests(task))
    assert len(tests) >= 5
    for file, name, points, concept in tests:
        assert isinstance(points, (int, float)) and points > 0, f"{file}::{name} declares no points"
        assert concept in english, f"{file}::{name}: concept {concept!r} is not a README.md section"
        assert carries(chinese, concept), \
            f"{file}::{name}: README.zh-CN.md has no section for {concept!r}"


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_every_row_of_what_the_graded_suite_checks_names_readme_sections(task):
    """The watcher tells a learner whose visible checks pass what the graded suite checks beyond them,
    from this table: each row names one or more of the README's sections (a name may hold a comma)."""
    text = task.readme.read_text(encoding="utf-8")
    table = text.split(f"## {GRADED_CHECKS}", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| check |")]
    checks = graded_checks(task)
    assert rows and set(checks) <= set(concepts_of(task)), set(checks) - set(concepts_of(task))
    assert sum(map(len, checks.values())) >= len(rows), "a row whose sections are not the README's"


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_hidden_suites_never_quote_their_own_source(task):
    """Hidden test files switch off assertion rewriting so failures carry messages only."""
    for path in (COURSE.hidden / task.name).glob("test_*.py"):
        assert "PYTEST_DONT_REWRITE" in (ast.get_docstring(ast.parse(path.read_text())) or ""), path.name


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_variants_apply_and_name_readme_concepts(task):
    variants = variants_of(task)
    kinds = {v.kind for v in variants}
    assert kinds == {"mutant", "alternative"}, "each hidden suite keeps mutants and alternatives"
    assert sum(v.kind == "alternative" for v in variants) >= 3
    sections = concepts_of(task)
    for variant in variants:
        variant.apply(base_source(task, variant.base))
        if variant.kind == "mutant":
            assert variant.concept in sections, f"{variant.name}: {variant.concept!r} is not a README section"
    assert len({v.name for v in variants}) == len(variants)


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_readme_rules_are_marked_in_both_languages_and_each_has_a_mutant(task):
    """Every rule the README marks (`<!-- rule: id -->`) is marked once; the Chinese README marks
    the same rules, in the same order, in its section of the same name; every rule has a mutant
    that breaks it and every mutant breaks a marked rule."""
    rules = rules_of(task)
    assert rules, "README.md marks no rule"
    ids = [rule.id for rule in rules]
    assert len(ids) == len(set(ids)), "a rule is marked twice in README.md"
    assert all(rule.text for rule in rules), [rule.id for rule in rules if not rule.text]
    chinese = rules_of(task, "zh-CN")
    assert [rule.id for rule in chinese] == ids, "README.zh-CN.md marks other rules than README.md, or in another order"
    for english, translated in zip(rules, chinese):
        assert carries(translated.section, english.section), \
            f"{english.id} is marked outside the Chinese section of {english.section!r}"
    broken = {v.rule for v in variants_of(task) if v.kind == "mutant"}
    assert not broken - set(ids), f"mutants name unmarked rules: {broken - set(ids)}"
    assert not set(ids) - broken, f"rules without a mutant: {sorted(set(ids) - broken)}"


def test_a_rule_is_the_words_before_its_marker_in_its_section():
    text = """# Title

## Batching

Documents differ in length; each batch is padded to its own longest example, <!-- rule: b.width -->
and labels are -100 over the padding. <!-- rule: b.labels -->

- `attention_mask`: 1 on real tokens,
  0 on padding. <!-- rule: b.mask -->

```
## not a section <!-- rule: b.fenced -->
```

## Tables

| value | formula |
| --- | --- |
| weights | `2 h` | <!-- rule: t.weights -->

**Contract.** the rest
0. <!-- rule: t.rest -->
"""
    assert [(r.id, r.section, r.text) for r in marked_rules(text)] == [
        ("b.width", "Batching", "Documents differ in length; each batch is padded to its own longest example,"),
        ("b.labels", "Batching", "and labels are -100 over the padding."),
        ("b.mask", "Batching", "`attention_mask`: 1 on real tokens, 0 on padding."),
        ("b.fenced", "Batching", "## not a section"),
        ("t.weights", "Tables", "weights | `2 h`"), ("t.rest", "Tables", "**Contract.** the rest 0.")]


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_variants_files_name_their_lists_alike(task):
    """Every suite's variants.py: COURSE_MUTANTS edit the reference, INDEPENDENT_MUTANTS the
    independent solution, MUTANTS is both, ALTERNATIVES the correct ones."""
    module = load_module(task.variants_file)
    assert all(v.kind == "mutant" and v.base == REFERENCE for v in module.COURSE_MUTANTS)
    assert all(v.kind == "mutant" and v.base == INDEPENDENT for v in module.INDEPENDENT_MUTANTS)
    assert module.MUTANTS == module.COURSE_MUTANTS + module.INDEPENDENT_MUTANTS
    assert all(v.kind == "alternative" for v in module.ALTERNATIVES)


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_an_independent_solution_comes_with_its_own_bugs(task):
    """Each suite keeps a solution written from the learner's view alone, as an alternative, and at
    least eight bugs planted in it, as mutants."""
    independent = [v for v in variants_of(task) if v.base == INDEPENDENT]
    assert task.independent_module.is_file(), f"no {task.independent_module.relative_to(task.hidden_dir.parent)}"
    assert sum(v.kind == "alternative" for v in independent) >= 1
    assert sum(v.kind == "mutant" for v in independent) >= 8
