"""`grader`: check your work, grade submissions, audit the suites.

Exit status (all commands): 0 success; 1 check: a visible test failed / grade: a score under
--fail-under / audit: a suite failed its audit; 2 bad usage; 3 a grading was incomplete
(collection problem, crash of the grading process): its report says why.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from grader.core import sandbox
from grader.running import audit as audit_mod
from grader.running import batch
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
                       help="submissions: folders (NN_name/<module>.py, a fork clone, or a flat upload) "
                            "or zip files of one")
    grade.add_argument("--tasks", nargs="+", default=[], metavar="TASK", help="grade only these tasks")
    grade.add_argument("--json", type=Path, metavar="OUT", help="score report path (one submission)")
    grade.add_argument("--out-dir", type=Path, metavar="DIR",
                       help="keep reports and logs here, one folder per submission, plus summary.csv "
                            "(default for several submissions: ./grading)")
    grade.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel (default 1)")
    grade.add_argument("--seed", type=int, default=0, help="seed for the suites' random inputs (default 0)")
    grade.add_argument("--fail-under", type=float, metavar="PERCENT", help="exit 1 if a score is below this")
    grade.add_argument("--isolation", choices=("auto", "required", "none"), default="auto",
                       help="run learner code in the sandbox where possible (auto, the default), refuse to "
                            "grade without it (required), or never (none)")
    grade.add_argument("--resume", action="store_true",
                       help="keep the reports --out-dir already holds and grade only the missing ones")
    grade.add_argument("--submission-timeout", type=float, default=runner.RUN_LIMIT_S, metavar="SECONDS",
                       help=f"wall-time limit of one submission's grading (default {runner.RUN_LIMIT_S:g})")
    grade.set_defaults(command=_grade)

    audit = commands.add_parser("audit", help="grade the reference, stub, mutants and alternatives")
    audit.add_argument("tasks", nargs="*", metavar="TASK", help="task names or numbers (default: all)")
    audit.add_argument("--jobs", type=int, default=2, help="gradings in parallel (default 2)")
    audit.add_argument("--json", type=Path, metavar="OUT", help="also write the audit as JSON")
    audit.add_argument("--backend", choices=("inprocess", "worker"), default="inprocess",
                       help="where the variants run: the course's own code needs no isolation, so "
                            "in-process by default (faster); `worker` audits through the official path")
    audit.set_defaults(command=_audit)
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
    missing = [p for p in args.paths if not (p.is_dir() or (p.is_file() and p.suffix.lower() == ".zip"))]
    if missing:
        console.print(f"[red]not a folder or a zip file: {escape(', '.join(map(str, missing)))}[/]")
        return USAGE
    if len(args.paths) > 1 and args.json:
        console.print("[red]--json takes one submission; with several, use --out-dir[/]")
        return USAGE
    if args.resume and not args.out_dir:
        console.print("[red]--resume needs the --out-dir of the batch to finish[/]")
        return USAGE
    if args.isolation == "required" and not sandbox.availability()[0]:
        why = escape(sandbox.availability()[1])
        console.print(f"[red]--isolation required, but no sandbox can be made here: {why}[/]")
        return USAGE
    out_dir = args.out_dir or (Path("grading") if len(args.paths) > 1 else None)
    template = runner.GradingRun(Path("."), tasks, seed=args.seed, isolation=args.isolation)
    with console.status(f"grading {len(args.paths)} submission(s)") as status:
        done = []

        def progress(entry):
            done.append(entry)
            status.update(f"graded {len(done)} of {len(args.paths)} (last: {escape(str(entry.source))})")
        entries = batch.grade(args.paths, template, out_dir, jobs=args.jobs, resume=args.resume,
                              limit_s=args.submission_timeout, on_done=progress)
    reports = [e.report for e in entries]
    if len(reports) == 1:
        print_report(reports[0], console)
        if args.json:
            write_report(reports[0], args.json)
    else:
        console.print(batch_table([e.name for e in entries], reports))
    if out_dir:
        console.print(f"reports and logs: {escape(str(out_dir))}/")
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


if __name__ == "__main__":
    sys.exit(main())
