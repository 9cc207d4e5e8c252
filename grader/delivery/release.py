"""`grader release OUT_DIR`: the student repository, built from the course.

What goes in, and nothing else:
- `exercises/NN_name/` of the released tasks: README (the chosen language as README.md), stub,
  visible tests;
- `datasets/`: the entries the released exercises name (`datasets/<entry>` in their READMEs,
  stubs or visible tests), `MANIFEST.json` cut down to those entries and the facts about them,
  and a README made of the course's sections about them;
- the grader runtime a learner needs for `pytest exercises/NN`, `grader check` and an nbgrader
  notebook's test cells: the `grader` package without the instructor's builders and templates
  (of `grader/delivery`, only `LEARNER_RUNTIME` goes);
- `pyproject.toml` (the course's, without the instructor's extra, testing `exercises/`),
  `constraints.txt`, a learner README in both languages, `.gitignore`, and the fork's CI
  workflow (`.github/workflows/check.yml`); with `classroom`, the Classroom workflow too.

Never `solutions/`, `tests/` (hidden suites, their probes, variants and references), the data
builder, or the course's own README, benchmarks and CI: a project test builds a release and
searches it for every hidden suite's lines and every reference function's body.
"""
from __future__ import annotations

import json
import re
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from grader.course import COURSE, Task
from grader.delivery import LANGUAGES, Refused, size_text
from grader.delivery.template import TEMPLATES, fill

IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis", ".ipynb_checkpoints")
_MENTION = re.compile(r"datasets/([A-Za-z0-9_.\-]+)")         # in prose: datasets/corpus/
_DATA_PATH = re.compile(r'COURSE\.datasets\s*/\s*"([A-Za-z0-9_.\-]+)"')   # in code: COURSE.datasets / "profiles"
# The datasets/ entry each fact of MANIFEST.json describes: a fact ships with its entry. A fact
# not listed here never ships, and a project test makes every new fact take a side.
FACT_SOURCES = {"corpus": "corpus", "tokenizer": "tiny_llama", "tiny_llama": "tiny_llama", "param_counts": "configs",
                "sft": "sft", "eval_results": "eval_results", "build": None}


class ReleaseError(Refused):
    """A release that cannot be built as asked; the message says why."""


@dataclass
class Release:
    root: Path
    tasks: list[Task]
    datasets: list[str]
    files: int
    bytes: int


def deliver(args, tasks: list[Task]) -> str:
    """`grader release`."""
    made = build_release(args.out, tasks, lang=args.lang, classroom=args.classroom)
    return (f"release written to {made.root}: {', '.join(t.name for t in made.tasks)}; "
            f"data: {', '.join(made.datasets) or 'none'}; {made.files} files, {size_text(made.bytes)}")


def build_release(out_dir: Path, tasks: list[Task], *, lang: str = "en", classroom: bool = False,
                  classroom_points: dict[str, float] | None = None) -> Release:
    """Write the student repository into `out_dir` (new or empty). `classroom_points` gives each
    task's visible points for the Classroom workflow (collected from the suites when omitted)."""
    out_dir = Path(out_dir)
    if lang not in LANGUAGES:
        raise ReleaseError(f"--lang must be one of {', '.join(LANGUAGES)}, not {lang!r}")
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ReleaseError(f"{out_dir} exists and is not an empty folder: a release is written into a new one")
    if not tasks:
        raise ReleaseError("no task to release")
    out_dir.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        _copy_exercise(task, out_dir / "exercises" / task.name, lang)
    entries = datasets_named(tasks)
    _copy_datasets(entries, out_dir / "datasets")
    shutil.copytree(COURSE.root / "grader", out_dir / "grader", ignore=_grader_runtime_only)
    (out_dir / "pyproject.toml").write_text(learner_pyproject(), encoding="utf-8")
    shutil.copy2(COURSE.root / "constraints.txt", out_dir / "constraints.txt")
    _write_readmes(out_dir, tasks, lang, classroom)
    shutil.copy2(TEMPLATES / "gitignore", out_dir / ".gitignore")
    workflows = out_dir / ".github" / "workflows"
    workflows.mkdir(parents=True)
    shutil.copy2(TEMPLATES / "check.yml", workflows / "check.yml")
    if classroom:
        if classroom_points is None:
            from grader.running.collect import declared_points
            classroom_points = {name: found["cpu"] for name, found in declared_points(tasks).items()}
        (workflows / "classroom.yml").write_text(classroom_workflow(tasks, classroom_points), encoding="utf-8")
    files = [p for p in out_dir.rglob("*") if p.is_file()]
    return Release(out_dir, list(tasks), entries, len(files), sum(p.stat().st_size for p in files))


# ---------------------------------------------------------------- exercises

def _copy_exercise(task: Task, target: Path, lang: str) -> None:
    shutil.copytree(task.exercise_dir, target, ignore=IGNORED)
    if lang == "zh-CN":     # the stubs send learners to README.md: make that the Chinese one
        (target / "README.md").rename(target / "README.en.md")
        (target / "README.zh-CN.md").rename(target / "README.md")


def _readme_title(task: Task, lang: str) -> str:
    readme = task.exercise_dir / ("README.zh-CN.md" if lang == "zh-CN" else "README.md")
    if not readme.exists():
        return task.title
    heading = next((line for line in readme.read_text(encoding="utf-8").splitlines() if line.startswith("# ")), "")
    return heading.removeprefix("# ").strip() or task.title


# ---------------------------------------------------------------- data

def datasets_named(tasks: list[Task]) -> list[str]:
    """The entries of datasets/ that the tasks' READMEs, stubs and visible tests name."""
    named: set[str] = set()
    for task in tasks:
        for path in sorted(task.exercise_dir.iterdir()):
            if path.suffix in (".md", ".py"):
                text = path.read_text(encoding="utf-8")
                named.update(_MENTION.findall(text), _DATA_PATH.findall(text))
    return sorted(name for name in named if name != "MANIFEST.json" and (COURSE.datasets / name).exists())


def _copy_datasets(entries: list[str], target: Path) -> None:
    target.mkdir(parents=True)
    for name in entries:
        source = COURSE.datasets / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=IGNORED)
        else:
            shutil.copy2(source, target / name)
    manifest = json.loads((COURSE.datasets / "MANIFEST.json").read_text(encoding="utf-8"))
    (target / "MANIFEST.json").write_text(json.dumps(released_manifest(manifest, entries), indent=2, sort_keys=True)
                                          + "\n", encoding="utf-8")
    (target / "README.md").write_text(_datasets_readme(entries), encoding="utf-8")


def released_manifest(manifest: dict, entries: list[str]) -> dict:
    """The course's manifest cut down to the shipped entries: its data version (which names the
    whole data set every score report records), their files and the facts about them."""
    shipped = set(entries)
    return {"data_version": manifest.get("data_version"), "data_version_rule": manifest.get("data_version_rule"),
            "files": {path: info for path, info in manifest.get("files", {}).items()
                      if path.split("/", 1)[0] in shipped},
            "facts": {name: fact for name, fact in manifest.get("facts", {}).items()
                      if FACT_SOURCES.get(name) in shipped}}


def _datasets_readme(entries: list[str]) -> str:
    """An introduction, then the course's README sections about the shipped entries (a section
    is about an entry when its heading starts with `<entry>/`)."""
    sections: list[list[str]] = []
    current: list[str] | None = None
    for line in (COURSE.datasets / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            first_word = line[3:].split(" ", 1)[0]
            entry = first_word[:-1] if first_word.endswith("/") else None
            current = [] if entry in entries else None
            if current is not None:
                sections.append(current)
        if current is not None:
            current.append(line)
    intro = ["# datasets/", "",
             "The data these exercises load, generated by the course's seeded build and listed in `MANIFEST.json`",
             "(the sha256 of every file; its `data_version` is recorded in every score report). Nothing is",
             "downloaded at run time. This folder is data, not a Python package: `import datasets` always means",
             "Hugging Face `datasets`.", ""]
    return "\n".join(intro + [line for section in sections for line in section]).rstrip() + "\n"


# ---------------------------------------------------------------- packaging and documents

LEARNER_RUNTIME = ("__init__.py", "notebook.py", "nbgrader_cells.py", "nbgrader_kernel.py")


def _grader_runtime_only(folder: str, names: list[str]) -> set[str]:
    """`shutil.copytree`'s ignore: bytecode everywhere, and all of `grader/delivery` but what a
    learner's notebook runs."""
    ignored = {n for n in names if n == "__pycache__" or n.endswith(".pyc")}
    if Path(folder).name == "delivery":
        ignored |= {n for n in names if n not in LEARNER_RUNTIME}
    return ignored


def learner_pyproject() -> str:
    """The course's pyproject.toml for the learner: the same dependencies and entry points (so
    the pinned set is one list), no instructor extra, pytest testing `exercises/`."""
    project = tomllib.loads((COURSE.root / "pyproject.toml").read_text(encoding="utf-8"))
    project["project"].pop("optional-dependencies", None)
    project["tool"].get("setuptools", {}).pop("package-data", None)      # the instructor's templates
    project["project"]["description"] = "Hands-on exercises for the ML engineer's tool layer, with their visible tests."
    project["tool"]["pytest"]["ini_options"]["testpaths"] = ["exercises"]
    for gate in ("ruff", "mypy"):       # the course's own lint and type gates: no release file is theirs
        project["tool"].pop(gate, None)
    return toml_text(project)


def toml_text(data: dict) -> str:
    """TOML for what a pyproject holds: tables of strings, numbers, booleans and lists of them."""
    lines: list[str] = []

    def table(prefix: str, values: dict) -> None:
        scalars = {k: v for k, v in values.items() if not isinstance(v, dict)}
        if prefix and (scalars or not values):
            lines.extend(["", f"[{prefix}]"])
        lines.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in scalars.items())
        for key, value in values.items():
            if isinstance(value, dict):
                table(f"{prefix}.{_toml_key(key)}" if prefix else _toml_key(key), value)

    table("", data)
    return "\n".join(lines).lstrip("\n") + "\n"


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        items = [_toml_value(v) for v in value]
        one_line = f"[{', '.join(items)}]"
        return one_line if len(one_line) <= 80 else "[\n" + "".join(f"    {item},\n" for item in items) + "]"
    raise TypeError(f"no TOML for {type(value).__name__}")


def _write_readmes(out_dir: Path, tasks: list[Task], lang: str, classroom: bool) -> None:
    """README.md in the chosen language, the other beside it (README.zh-CN.md or README.en.md)."""
    names = {"en": "README.md", "zh-CN": "README.zh-CN.md"} if lang == "en" else \
        {"zh-CN": "README.md", "en": "README.en.md"}
    links = {"en": f"中文说明见 [{names['zh-CN']}]({names['zh-CN']})。", "zh-CN": f"English: [{names['en']}]({names['en']})."}
    for language, name in names.items():
        suffix = "" if language == "en" else f".{language}"
        rows = [f"| {t.name[:2]} | [`exercises/{t.name}`](exercises/{t.name}) | {_readme_title(t, language)} |"
                for t in tasks]
        classroom_note = fill(f"README.classroom{suffix}.md") if classroom else ""
        text = fill(f"README.learner{suffix}.md", OTHER_README=links[language], TASK_TABLE="\n".join(rows),
                    CLASSROOM=classroom_note)
        (out_dir / name).write_text(text, encoding="utf-8")


def classroom_workflow(tasks: list[Task], points: dict[str, float]) -> str:
    """`.github/workflows/classroom.yml`: one command grader per task, worth its visible points
    (Classroom awards whole points, so a fractional total is rounded), then the reporter."""
    ids = [f"exercise{task.name[:2]}" for task in tasks]
    steps = [fill("classroom_step.yml", NAME=json.dumps(_readme_title(task, "en")), ID=step_id, TASK=task.name[:2],
                  POINTS=str(round(points[task.name]))) for task, step_id in zip(tasks, ids)]
    results = [f'        {step_id.upper()}_RESULTS: "${{{{steps.{step_id}.outputs.result}}}}"' for step_id in ids]
    return fill("classroom.yml", STEPS="".join(steps).rstrip("\n"), RESULTS="\n".join(results),
                RUNNERS=",".join(ids))
