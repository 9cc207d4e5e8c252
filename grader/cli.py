"""`grader`: check your work, grade submissions, audit the suites, hand the course out.

Exit status (all commands): 0 success; 1 check: a visible test failed / grade: a score under
--fail-under / audit: a suite failed its audit / nbgrader: the course's files do not fit a
notebook; 2 bad usage; 3 a grading was incomplete (collection problem, crash of the grading
process): its report says why.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from rich.console import Console

from grader.delivery.nbgrader import LANGUAGES, BuildError, write_course
from grader.running import audit as audit_mod
from grader.running import runner
from grader.reports.render import audit_table, batch_table, print_report
from grader.reports.report import write_report
from grader.tasks import EXERCISES, all_tasks, task_named

OK, FAILED, USAGE, INCOMPLETE = 0, 1, 2, 3


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "command"):
        parser.print_help()
        return USAGE
    console = Console(highlight=False)
    try:
        tasks = [task_named(name) for name in args.tasks] if args.tasks else list(all_tasks())
    except KeyError as exc:
        console.print(f"[red]{exc.args[0]}[/]")
        return USAGE
    return args.command(args, tasks, console)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grader", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers()

    check = commands.add_parser("check", help="run the visible tests on your exercises/ (or --impl DIR)")
    check.add_argument("tasks", nargs="*", metavar="TASK", help="task names or numbers (default: all)")
    check.add_argument("--impl", type=Path, default=EXERCISES, help="tree to check (default: exercises/)")
    check.add_argument("--json", type=Path, metavar="OUT", help="also write the score report here")
    check.set_defaults(command=_check)

    grade = commands.add_parser("grade", help="grade submissions on the visible and hidden suites")
    grade.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                       help="submission trees: NN_name/<module>.py, a fork clone, or a flat upload")
    grade.add_argument("--tasks", nargs="+", default=[], metavar="TASK", help="grade only these tasks")
    grade.add_argument("--json", type=Path, metavar="OUT", help="score report path (one submission)")
    grade.add_argument("--out-dir", type=Path, metavar="DIR",
                       help="keep reports and logs here, one folder per submission, plus summary.csv "
                            "(default for several submissions: ./grading)")
    grade.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel (default 1)")
    grade.add_argument("--seed", type=int, default=0, help="seed for the suites' random inputs (default 0)")
    grade.add_argument("--fail-under", type=float, metavar="PERCENT", help="exit 1 if a score is below this")
    grade.set_defaults(command=_grade)

    audit = commands.add_parser("audit", help="grade the reference, stub, mutants and alternatives")
    audit.add_argument("tasks", nargs="*", metavar="TASK", help="task names or numbers (default: all)")
    audit.add_argument("--jobs", type=int, default=2, help="gradings in parallel (default 2)")
    audit.add_argument("--json", type=Path, metavar="OUT", help="also write the audit as JSON")
    audit.add_argument("--backend", choices=("inprocess", "worker"), default="inprocess",
                       help="where the variants run: the course's own code needs no isolation, so "
                            "in-process by default (faster); `worker` audits through the official path")
    audit.set_defaults(command=_audit)

    nbgrader = commands.add_parser("nbgrader", help="write an nbgrader course directory, one assignment per exercise")
    nbgrader.add_argument("course_dir", type=Path, metavar="COURSE_DIR", help="created or updated")
    nbgrader.add_argument("--tasks", nargs="+", default=[], metavar="TASK", help="only these tasks (default: all)")
    nbgrader.add_argument("--lang", choices=LANGUAGES, default="en", help="language of the notebooks (default en)")
    nbgrader.add_argument("--gpu", action="store_true",
                          help="the autograder has a CUDA GPU: GPU tests count toward the grade (default: left out)")
    nbgrader.set_defaults(command=_nbgrader)
    return parser


def _check(args, tasks, console) -> int:
    report = runner.run(runner.GradingRun(args.impl, tasks, hidden=False), stream=True)
    print_report(report, console, first_hint_only=True)
    if args.json:
        write_report(report, args.json)
    if not report.complete:
        return INCOMPLETE
    return FAILED if any(t.lost for t in report.tests()) else OK


def _grade(args, tasks, console) -> int:
    missing = [p for p in args.paths if not p.is_dir()]
    if missing:
        console.print(f"[red]not a folder: {', '.join(map(str, missing))}[/]")
        return USAGE
    if len(args.paths) > 1 and args.json:
        console.print("[red]--json takes one submission; with several, use --out-dir[/]")
        return USAGE
    names = _unique_names(args.paths)
    out_dir = args.out_dir or (Path("grading") if len(args.paths) > 1 else None)
    jobs = [runner.GradingRun(path, tasks, seed=args.seed, out_dir=out_dir / name if out_dir else None)
            for path, name in zip(args.paths, names)]
    with console.status(f"grading {len(jobs)} submission(s)") as status:
        done = []

        def progress(job):
            done.append(job)
            status.update(f"graded {len(done)} of {len(jobs)} (last: {job.impl})")
        reports = runner.run_many(jobs, args.jobs, on_done=progress)
    if len(reports) == 1:
        print_report(reports[0], console)
        if args.json:
            write_report(reports[0], args.json)
    else:
        console.print(batch_table(names, reports))
    if out_dir:
        _write_summary(out_dir, names, args.paths, reports)
        console.print(f"reports and logs: {out_dir}/")
    if any(not r.complete for r in reports):
        return INCOMPLETE
    if args.fail_under is not None and any(r.total.percent < args.fail_under for r in reports):
        return FAILED
    return OK


def _audit(args, tasks, console) -> int:
    with console.status("auditing: grading reference, stub, mutants and alternatives"):
        audits = audit_mod.audit(tasks, jobs=args.jobs, backend=args.backend)
    for task_audit in audits:
        console.print(audit_table(task_audit))
    if args.json:
        args.json.write_text(json.dumps([a.to_json() for a in audits], indent=2) + "\n", encoding="utf-8")
    return OK if all(a.ok for a in audits) else FAILED


def _nbgrader(args, tasks, console) -> int:
    try:
        with console.status("collecting the suites, writing the notebooks"):
            notebooks = write_course(args.course_dir, tasks, args.lang, count_gpu_tests=args.gpu)
    except BuildError as exc:
        console.print(f"[red]{exc}[/]")
        return FAILED
    console.print(f"wrote {args.course_dir / 'nbgrader_config.py'} and {len(notebooks)} notebook(s):")
    for path in notebooks:
        console.print(f"  {path}")
    console.print(f"next, in {args.course_dir}: nbgrader generate_assignment <task> for each, then release them "
                  "(README.md, \"nbgrader classroom\")")
    return OK


def _unique_names(paths: list[Path]) -> list[str]:
    names, seen = [], {}
    for path in paths:
        base = path.resolve().name or "submission"
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return names


def _write_summary(out_dir: Path, names, paths, reports) -> None:
    """summary.csv: one row per submission, one column per task: the instructor's gradebook."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tasks = sorted({t.task for r in reports for t in r.tasks})
    with open(out_dir / "summary.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", "path", *tasks, "points", "max_points", "percent", "complete", "problems"])
        for name, path, report in zip(names, paths, reports):
            total = report.total
            writer.writerow([name, str(path), *[report.task(t).points if report.task(t) else "" for t in tasks],
                             total.points, total.max_points, total.percent, report.complete,
                             " | ".join(report.problems)])


if __name__ == "__main__":
    sys.exit(main())
