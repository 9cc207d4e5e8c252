"""`grader`: check your work, grade submissions, audit the suites, hand the course out.

Exit status (all commands): 0 success; 1 check: a visible test failed, or the score is under
--fail-under / grade: a score under --fail-under / audit: a suite failed its audit / nbgrader:
the course's files do not fit a notebook; 2 bad usage; 3 a grading was incomplete (collection
problem, crash of the grading process): its report says why.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from grader import logs
from grader.course import COURSE, locate_module
from grader.delivery import CHANNELS, Channel, Refused
from grader.isolation import levels, sandbox, uid_jail
from grader.reports.formats import FORMATS
from grader.reports.render import batch_table, print_report
from grader.running import batch, runner
from grader.schema.report import ScoreReport, unwritten_reason, write_text_atomically

OK, FAILED, USAGE, INCOMPLETE = 0, 1, 2, 3


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logs.configure(verbose=args.verbose)
    if not hasattr(args, "command"):
        parser.print_help()
        return USAGE
    console = Console(highlight=False)
    sandbox.trust_this_process()
    try:
        names = getattr(args, "tasks", None)
        tasks = [COURSE.task_named(name) for name in names] if names else list(COURSE.tasks())
    except KeyError as exc:
        console.print(f"[red]{exc.args[0]}[/]")
        return USAGE
    return args.command(args, tasks, console)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grader", description=__doc__.split("\n\n")[0])
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="show the grader's log on stderr: the errors it recovered from (grader --verbose grade ...)")
    commands = parser.add_subparsers()

    check = commands.add_parser("check", help="run the visible tests on your exercises/ (or --impl DIR)")
    check.add_argument("tasks", nargs="*", metavar="TASK", help="task names or numbers (default: all)")
    check.add_argument("--impl", type=Path, default=COURSE.exercises, help="tree to check (default: exercises/)")
    check.add_argument("--format", choices=("text", "github"), default="text",
                       help="github: also annotations on your lines, the job summary and step outputs "
                            "(GitHub Actions)")
    check.add_argument("--fail-under", type=float, metavar="PERCENT",
                       help="exit 1 only if the score is below this (default: if any test failed)")
    check.add_argument("--long", action="store_true",
                       help="also run the long visible checks (a convergence run: minutes on a CPU)")
    _report_outputs(check)
    check.set_defaults(command=_check)

    watch = commands.add_parser("watch", help="check a task again at every save of your module (a warm loop)")
    watch.add_argument("task", nargs="?", metavar="TASK", help="task name or number (default: the first not complete)")
    watch.add_argument("--impl", type=Path, default=COURSE.exercises, help="tree to watch (default: exercises/)")
    watch.add_argument("--lang", choices=("en", "zh-CN"), help="language of the hints (default: from the locale)")
    watch.add_argument("--concept", metavar="NAME", help="the concept to show first (a README section, or the start "
                                                          "of its name; the n and p keys move on)")
    watch.set_defaults(command=_watch)

    hint = commands.add_parser("hint", help="the next hint of a concept you are stuck on")
    hint.add_argument("task", metavar="TASK", help="task name or number")
    hint.add_argument("concept", nargs="?", help="a README section, or the start of its name "
                                                 "(default: the first concept your last run left failing)")
    hint.add_argument("--lang", choices=("en", "zh-CN"), help="language of the hints (default: from the locale)")
    hint.set_defaults(command=_hint)

    progress = commands.add_parser("progress", help="what your runs so far passed, per exercise")
    progress.set_defaults(command=_progress)

    grade = commands.add_parser("grade", help="grade submissions on the visible and hidden suites")
    grade.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                       help="submissions: folders (NN_name/<module>.py, a fork clone, or a flat upload) "
                            "or zip files of one")
    grade.add_argument("--tasks", nargs="+", default=[], metavar="TASK", help="grade only these tasks")
    grade.add_argument("--out-dir", type=Path, metavar="DIR",
                       help="keep reports and logs here, one folder per submission, plus the class summary "
                            "(summary.csv, concepts.csv, class.html; default for several submissions: ./grading)")
    grade.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel (default 1)")
    grade.add_argument("--seed", type=int, help="seed for the suites' random inputs (default: drawn per submission "
                                                "from the course's secret and its modules, the same at every regrading)")
    grade.add_argument("--fail-under", type=float, metavar="PERCENT", help="exit 1 if a score is below this")
    grade.add_argument("--isolation", choices=levels.CHOICES,
                       help="isolate learner code as strongly as this machine allows: the sandbox, else the uid "
                            "level (auto, the default); refuse to grade with neither (required, the default with "
                            "--gradescope or --prairielearn, whose platforms take the result as a grade); or not at "
                            "all (none)")
    grade.add_argument("--resume", action="store_true",
                       help="keep the reports --out-dir already holds and grade only the missing ones")
    grade.add_argument("--submission-timeout", type=float, default=runner.RUN_LIMIT_S, metavar="SECONDS",
                       help=f"wall-time limit of one submission's grading (default {runner.RUN_LIMIT_S:g})")
    grade.add_argument("--received-times", type=Path, metavar="CSV",
                       help="when each submission was handed in, for the late policy: `submission,received_at` "
                            "rows (its name or path, an ISO 8601 time with its UTC offset); default: a clone's commit "
                            "time, else its files' times")
    _batch_options(grade)
    _report_outputs(grade, one_submission=True, platforms=True)
    grade.set_defaults(command=_grade)

    audit = commands.add_parser("audit", help="grade the reference, stub, mutants and alternatives")
    audit.add_argument("tasks", nargs="*", metavar="TASK", help="task names or numbers (default: all)")
    audit.add_argument("--jobs", type=int, default=2, help="gradings in parallel (default 2)")
    audit.add_argument("--json", type=Path, metavar="OUT", help="also write the audit as JSON")
    audit.add_argument("--seeds", type=int, default=1, metavar="N",
                       help="audit at seeds 0..N-1 of the suites' random inputs (an official grading draws its seed "
                            "per submission): the reference and alternatives must pass at every seed, each mutant "
                            "must be killed at most of them, and a test whose verdict flips is listed (default 1)")
    audit.add_argument("--backend", choices=("inprocess", "worker"), default="inprocess",
                       help="where the variants run: the course's own code needs no isolation, so "
                            "in-process by default (faster); `worker` audits through the official path")
    audit.add_argument("--operators", nargs="?", type=int, const=-1, metavar="N",
                       help="also grade the operator mutants mutmut's operators make of each reference: every one, "
                            "or N of each task's drawn with --operator-seed; each must lose points to a test or be "
                            "declared equivalent in the task's variants file (EQUIVALENT, with its reason)")
    audit.add_argument("--operator-seed", type=int, default=0, metavar="S",
                       help="which N operator mutants --operators N draws (default 0)")
    audit.set_defaults(command=_audit)

    summary = commands.add_parser("summary", help="the class summary of a folder of score reports")
    summary.add_argument("folder", type=Path, metavar="DIR",
                         help="a batch's folder: DIR/<submission>/score_report.json (as grade --out-dir writes)")
    summary.set_defaults(command=_summary)

    from grader.gradebook.commands import add_commands
    add_commands(commands)

    for channel in CHANNELS:
        command = commands.add_parser(channel.command, help=channel.help)
        channel.add_options(command)
        command.set_defaults(command=functools.partial(_deliver, channel))
    return parser


def _batch_options(grade) -> None:
    """Large classes: a slice of the batch (--shard), and where its gradings run (--executor)."""
    from grader.running.slurm import MAX_RUNNING
    grade.add_argument("--shard", metavar="I/N",
                       help="grade only the I-th of N slices of the submissions (sorted by path), I from 0 to N-1; "
                            "`--shard N` takes I from JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) or "
                            "SLURM_ARRAY_TASK_ID")
    grade.add_argument("--executor", choices=("local", "slurm"), default="local",
                       help="where the gradings run: here, --jobs at a time (local, the default), or as a Slurm "
                            "job array, waiting for it (slurm; --out-dir on a file system the nodes share)")
    slurm = grade.add_argument_group("--executor slurm (defaults from a grading's budget: the instructors' guide, "
                                     "\"Large classes\")")
    slurm.add_argument("--partition", help="the Slurm partition (default: the cluster's default)")
    slurm.add_argument("--time-limit", type=int, metavar="MINUTES", help="of each array task")
    slurm.add_argument("--mem-gb", type=float, help="memory of each array task")
    slurm.add_argument("--cpus-per-task", type=int, help="cores of each array task")
    slurm.add_argument("--gpus-per-task", type=int, default=0, help="GPUs of each array task (default 0)")
    slurm.add_argument("--max-tasks", type=int, default=MAX_RUNNING,
                       help=f"array tasks running at once (default {MAX_RUNNING})")
    slurm.add_argument("--per-task", type=int, default=1, metavar="N",
                       help="submissions graded by each array task, --jobs of them at once (default 1)")
    slurm.add_argument("--slurm-folder", type=Path, metavar="DIR",
                       help="job scripts and logs, on the shared file system (default: OUT_DIR/.slurm)")


def _executor(args, out_dir: Path | None, isolation_wanted: str):
    from grader.running.executors import LocalExecutor
    if args.executor == "local":
        return LocalExecutor(args.jobs)
    assert out_dir is not None, "the caller refuses --executor slurm without --out-dir"
    from grader.running.slurm import SlurmExecutor, SlurmOptions
    return SlurmExecutor(SlurmOptions(
        folder=(args.slurm_folder or out_dir / ".slurm").absolute(), partition=args.partition,
        time_min=args.time_limit, mem_gb=args.mem_gb, cpus_per_task=args.cpus_per_task,
        gpus_per_task=args.gpus_per_task, max_running=args.max_tasks, per_task=args.per_task, jobs=args.jobs,
        isolation=isolation_wanted))


def _report_outputs(command, one_submission: bool = False, platforms: bool = False) -> None:
    """An option per output format (`grader.reports.formats`); the platforms' with `platforms`."""
    scope = " (one submission)" if one_submission else ""
    for output in FORMATS:
        if platforms or not output.platform:
            command.add_argument(output.flag, type=Path, metavar="OUT", help=f"{output.help}{scope}")
            if output.add_options:
                output.add_options(command)


def _check(args, tasks, console) -> int:
    from grader.reports import github
    extra = ["--long"] if args.long else []
    # Under Actions, everything before the annotations may carry learner text: shown, never run.
    with github.commands_stopped() if args.format == "github" else contextlib.nullcontext():
        report = runner.run(runner.GradingRun(args.impl, tasks, hidden=False, seed=0, extra_args=extra), stream=True)
        print_report(report, console, first_failure_only=True)
        _write_outputs(report, args)
        if args.impl.resolve() == COURSE.exercises.resolve():        # the learner's own checkout: remembered
            from grader.learning import progress
            progress.record(report, "check")        # hints are asked for (`grader hint`), never pushed here
    if args.format == "github":
        github.publish(report)
    if not report.complete:
        return INCOMPLETE
    if args.fail_under is not None:
        return FAILED if report.total.percent < args.fail_under else OK
    return FAILED if any(t.lost for t in report.tests()) else OK


def _watch(args, tasks, console) -> int:
    from grader.learning import hints, progress, watch
    try:
        task = COURSE.task_named(args.task) if args.task else watch.default_task(progress.load())
    except KeyError as exc:
        console.print(f"[red]{escape(exc.args[0])}[/]")
        return USAGE
    module = locate_module(args.impl, task)
    if not module.is_file():
        console.print(f"[red]no {escape(task.module)}.py to watch: looked for {escape(str(module))}[/]")
        return USAGE
    try:
        concept = hints.concept_named(task, args.concept) if args.concept else None
    except KeyError as exc:
        console.print(f"[red]{escape(exc.args[0])}[/]")
        return USAGE
    return watch.watch(task, args.impl.resolve(), console, hints.language(args.lang), concept)


def _hint(args, tasks, console) -> int:
    from grader.learning.loop import show_hint
    return OK if show_hint(args.task, args.concept, args.lang, console) else USAGE


def _progress(args, tasks, console) -> int:
    from grader.learning.loop import progress_view
    console.print(progress_view())
    return OK


def _grade(args, tasks, console) -> int:
    missing = [p for p in args.paths if not (p.is_dir() or (p.is_file() and p.suffix.lower() == ".zip"))]
    if missing:
        console.print(f"[red]not a folder or a zip file: {escape(', '.join(map(str, missing)))}[/]")
        return USAGE
    single = [output.flag for output in FORMATS if getattr(args, output.option)]
    if len(args.paths) > 1 and single:
        console.print(f"[red]{single[0]} takes one submission; with several, use --out-dir[/]")
        return USAGE
    if args.resume and not args.out_dir:
        console.print("[red]--resume needs the --out-dir of the batch to finish[/]")
        return USAGE
    shard = None
    if args.shard:
        from grader.running import shards
        try:
            shard = shards.parse(args.shard)
        except shards.ShardError as exc:
            console.print(f"[red]{escape(str(exc))}[/]")
            return USAGE
    if (shard or args.executor != "local") and (single or not args.out_dir):
        console.print("[red]--shard and --executor slurm write one folder per submission: give --out-dir "
                      "(and no one-submission output)[/]")
        return USAGE
    if args.executor == "slurm":
        import importlib.util
        import shutil
        if importlib.util.find_spec("submitit") is None or shutil.which("sbatch") is None:
            console.print("[red]--executor slurm needs submitit (pip install -e '.[cluster]') and Slurm's sbatch "
                          "on the PATH[/]")
            return USAGE
    out_dir = args.out_dir or (Path("grading") if len(args.paths) > 1 else None)
    try:
        template = grading_template(args, tasks, args.paths, out_dir, console)
    except levels.IsolationUnavailable as exc:
        if len(args.paths) == 1:          # a platform reads these files: they say why nothing was graded
            _write_outputs(levels.refused_report(exc, args.paths[0]), args)
        return USAGE
    from grader.gradebook.batches import Recorder
    from grader.gradebook.handed_in import TimesError, read_times
    from grader.gradebook.store import Gradebook, GradebookError
    try:       # refused before anything is graded: a gradebook this grader cannot use, a times file with a typo
        times = read_times(args.received_times) if args.received_times else None
        book = Gradebook.open(out_dir) if out_dir and not shard else None
    except (GradebookError, TimesError) as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        return USAGE
    from grader.running.progress import BatchProgress
    with BatchProgress(console=console) as progress, book or contextlib.nullcontext():
        entries = batch.grade(args.paths, template, out_dir, jobs=args.jobs, resume=args.resume,
                              limit_s=args.submission_timeout, shard=shard,
                              executor=_executor(args, out_dir, _isolation_wanted(args)),
                              on_plan=progress.planned, on_done=lambda entry: progress.finished(entry.report),
                              on_poll=progress.queue, record=book and Recorder(book, args.executor, times))
        class_rows = _class_rows(book, out_dir, entries, whole_batch=shard is not None)
    reports = [entry.graded for entry in entries]
    if len(reports) == 1:
        unwritten = _write_outputs(reports[0], args)      # first: the files are what a platform reads
        print_report(reports[0], console)
    else:
        console.print(batch_table([e.name for e in entries], reports))
        unwritten = []
    if out_dir:
        unwritten += _write_batch_outputs(out_dir, entries, class_rows)
        console.print(f"reports, logs, the gradebook and the class summary (summary.csv, concepts.csv, class.html): "
                      f"{escape(str(out_dir))}/")
    if any(not r.complete for r in reports) or unwritten:
        return INCOMPLETE
    if args.fail_under is not None and any(r.total.percent < args.fail_under for r in reports):
        return FAILED
    return OK


def grading_template(args, tasks, paths: list[Path], out_dir: Path | None, console) -> runner.GradingRun:
    """What every submission of a batch (or a regrade) is graded like: at the isolation asked for,
    resolved on this machine (said, and raised, when it cannot be given), with a warning where
    learner code runs unprotected; at the uid level the batch's folder and submissions are sealed
    to their owner."""
    wanted, limits = _isolation_wanted(args), sandbox.Limits.from_env()
    try:
        where = levels.resolve(wanted, "worker", limits)
    except levels.IsolationUnavailable as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        raise
    level, reason = where["level"], where["reason"]
    if level == "none":
        console.print(f"[yellow]warning: learner code runs unprotected here, with this user's rights "
                      f"({escape(reason)}): grade trusted code only, or use --isolation required[/]")
    if level == "uid":          # workers of another uid: the batch's results and submissions are the owner's alone
        if out_dir:
            out_dir.mkdir(parents=True, exist_ok=True)
        uid_jail.seal(*([out_dir] if out_dir else []), *paths)
    return runner.GradingRun(Path("."), tasks, isolation=where, limits=limits, seed=getattr(args, "seed", None))


def _class_rows(book, out_dir: Path | None, entries, whole_batch: bool) -> list:
    """The rows of the class files: the gradebook's current grades; a shard's, every report in the
    out-dir so far (the other shards' too: `grader summary DIR` records them once all have ended)."""
    from grader.gradebook.batches import class_entries
    from grader.reports.summary import load_entries
    if book is not None:
        return class_entries(book, COURSE)
    return load_entries(out_dir) if whole_batch and out_dir else entries


def _isolation_wanted(args) -> str:
    """The isolation asked for: as given on the command line; else `required` when a platform takes
    the result as a grade (no forgotten flag grades learner code unprotected for a platform); else
    `auto`."""
    if args.isolation:
        return args.isolation
    return "required" if any(getattr(args, output.option, None) for output in FORMATS if output.platform) else "auto"


def _write_outputs(report: ScoreReport, args) -> list[str]:
    """Every format asked for, each rendered from the one score report. A format that cannot be
    rendered or written costs that file alone, never the others: the reason goes to stderr, and
    the list of them is returned."""
    unwritten = []
    for output in sorted(FORMATS, key=lambda output: not output.platform):      # a platform's file first
        path = getattr(args, output.option, None)
        if path:
            unwritten += _attempt(output.what, path,
                                  lambda path, output=output: write_text_atomically(path, output.render(report, args)))
    return unwritten


def _write_batch_outputs(out_dir: Path, entries, class_rows) -> list[str]:
    """Each submission's page, and the class summary of `class_rows`. A page that cannot be
    written costs that submission its page alone (said in its summary row and on stderr); the
    others' pages and the class files are written all the same."""
    from grader.reports.html import report_html
    from grader.reports.summary import write_class_summary
    unwritten = []
    for entry in entries:
        page = out_dir / entry.name / "report.html"
        failed = _attempt("HTML page", page, lambda path, report=entry.report: write_text_atomically(path, report_html(report)))
        entry.unwritten += failed
        unwritten += failed
    pages_unwritten = {entry.name: entry.unwritten for entry in entries}
    for row in class_rows:          # a page's failure is said in its learner's summary row
        row.unwritten = pages_unwritten.get(row.name, row.unwritten)
    _, failed = write_class_summary(out_dir, class_rows)
    for why in failed:
        _say_unwritten(why)
    return unwritten + failed


def _attempt(what: str, path: Path, write) -> list[str]:
    """`write(path)`; what could not be written and why (also on stderr), or nothing."""
    try:
        write(path)
    except Exception as exc:        # a renderer's failure on one learner's data, or a path that cannot be written
        why = unwritten_reason(what, path, exc)
        _say_unwritten(why)
        return [why]
    return []


def _say_unwritten(why: str) -> None:
    print(f"grader: {why}", file=sys.stderr, flush=True)


def _audit(args, tasks, console) -> int:
    if not COURSE.hidden.is_dir():
        console.print("[red]this copy of the course has no hidden suites to audit (a student release?)[/]")
        return USAGE
    from grader.reports.render import audit_table, operator_table, sweep_table
    from grader.running import audit as audit_mod
    from grader.running.operators import OperatorSample, OperatorsUnavailable
    if args.operators is not None and args.seeds > 1:
        console.print("[red]--operators audits at one seed: give it without --seeds[/]")
        return USAGE
    if args.seeds > 1:
        seeds = list(range(args.seeds))
        with console.status(f"auditing at {args.seeds} seeds"):
            per_task = audit_mod.sweep(tasks, seeds, jobs=args.jobs, backend=args.backend)
        sweeps = [audit_mod.Sweep(task.name, seeds, audits) for task, audits in zip(tasks, per_task)]
        for one in sweeps:
            console.print(sweep_table(one))
        if args.json:
            args.json.write_text(json.dumps([s.to_json() for s in sweeps], indent=2) + "\n", encoding="utf-8")
        return OK if all(s.ok for s in sweeps) else FAILED
    operators = None if args.operators is None else \
        OperatorSample(None if args.operators < 0 else args.operators, args.operator_seed)
    try:
        with console.status("auditing: grading reference, stub, mutants and alternatives"):
            audits = audit_mod.audit(tasks, jobs=args.jobs, backend=args.backend, operators=operators)
    except OperatorsUnavailable as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        return USAGE
    for task_audit in audits:
        console.print(audit_table(task_audit))
        operators_left = operator_table(task_audit)
        if operators_left is not None:
            console.print(operators_left)
    if args.json:
        args.json.write_text(json.dumps([a.to_json() for a in audits], indent=2) + "\n", encoding="utf-8")
    return OK if all(a.ok for a in audits) else FAILED


def write_class_files(folder: Path, book) -> list[str]:
    """summary.csv, concepts.csv and class.html from the gradebook's current grades, the reports
    in `folder` that cannot be read listed too; what could not be written (also on stderr)."""
    from grader.gradebook.batches import class_entries
    from grader.reports.summary import load_entries, write_class_summary
    unreadable = [entry for entry in load_entries(folder) if entry.report is None]
    _, failed = write_class_summary(folder, class_entries(book, COURSE, unreadable))
    for why in failed:
        _say_unwritten(why)
    return failed


def _summary(args, tasks, console) -> int:
    from grader.gradebook.batches import Recorder, class_entries
    from grader.gradebook.store import Gradebook, GradebookError
    from grader.reports.summary import load_entries, write_class_summary
    entries = load_entries(args.folder) if args.folder.is_dir() else []
    if not entries:
        console.print(f"[red]no score reports in {args.folder} (expected DIR/<submission>/score_report.json)[/]")
        return USAGE
    unreadable = [e for e in entries if e.report is None]
    try:      # every report recorded (a shard's, an array task's): recording one twice changes nothing
        with Gradebook.open(args.folder) as book:
            record = Recorder(book, "reports on disk")
            for entry in entries:
                record(entry)
            rows = class_entries(book, COURSE, unreadable)
    except GradebookError as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        return USAGE
    written, failed = write_class_summary(args.folder, rows)
    for path in written:
        console.print(f"wrote {path}")
    for why in failed:
        _say_unwritten(why)
    for entry in unreadable:
        console.print(f"[red]{entry.name}: {entry.status}[/]")
    return INCOMPLETE if failed or unreadable or any(not e.report.complete for e in entries if e.report) else OK


def _deliver(channel: Channel, args, tasks, console) -> int:
    """`grader <channel>`: what its module (`grader.delivery.<module>`) delivers, said on the
    console; a refusal (the course's files, or the options, do not fit) said instead."""
    try:
        delivery = importlib.import_module(f"grader.delivery.{channel.module}")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("grader.delivery"):
            console.print(f"[red]`grader {channel.command}` needs the full course: a student release does not carry it[/]")
            return USAGE
        raise
    try:
        with console.status(channel.busy) if channel.busy else contextlib.nullcontext():
            said = delivery.deliver(args, tasks)
    except Refused as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        return USAGE
    if said:
        console.print(escape(said))
    return OK


if __name__ == "__main__":
    sys.exit(main())
