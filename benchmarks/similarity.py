"""`grader similarity` on a class of N submissions of one task (500 by default): the time to
compare every pair and write the report, and how many pairs it flags. A benchmark, not a test:
it prints figures and asserts nothing.

The class: a tenth are disguised copies of the reference (names renamed, functions reordered,
comments added: `tests/planted_copies.py`); the rest stand in for the others with the reference
or the independent solution under names of their own. Renaming is what the report sees through,
so nearly every pair is over the threshold: the report's worst case, every pair drawn up to its
limit.

    python benchmarks/similarity.py                  # 500 submissions of exercise 01
    python benchmarks/similarity.py --tasks 04 --learners 200
"""
import argparse
import tempfile
import time
from pathlib import Path

from grader.course import COURSE
from grader.gradebook.batches import Recorder
from grader.gradebook.similarity import similarity
from grader.gradebook.store import Gradebook
from grader.reports.summary import Entry
from grader.schema.report import ScoreReport
from grader.worker.loading import load_module

planted = load_module(Path(__file__).resolve().parent.parent / "tests" / "planted_copies.py")


def honest(source: str, learner: int) -> str:
    """The learner's own names: every local name suffixed by their number."""
    return planted.renamed(source).replace("_value", f"_{learner}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["01"])
    parser.add_argument("--learners", type=int, default=500)
    args = parser.parse_args()
    for name in args.tasks:
        task = COURSE.task_named(name)
        bases = [task.reference_module.read_text(), task.independent_module.read_text()]
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch)
            with Gradebook.open(root / "batch") as book:
                for learner in range(args.learners):
                    source = planted.disguised(bases[0]) if learner % 10 == 0 else honest(bases[learner % 2], learner)
                    folder = root / "class" / f"learner{learner:04d}"
                    (folder / task.name).mkdir(parents=True)
                    (folder / task.name / f"{task.module}.py").write_text(source)
                    Recorder(book, "benchmark")(Entry(folder.name, str(folder), ScoreReport.failed("-", {"path": str(folder)})))
                started = time.perf_counter()
                found = similarity(book, task, root / "report.html")
                took = time.perf_counter() - started
            size = (root / "report.html").stat().st_size / 1e6 if (root / "report.html").exists() else 0.0
            print(f"{task.name}: {args.learners} submissions, {args.learners * (args.learners - 1) // 2} pairs "
                  f"compared in {took:.1f} s; {len(found.pairs)} pairs over the threshold; report {size:.1f} MB")

if __name__ == "__main__":
    main()
