"""The instructor's commands over a batch folder's gradebook: `regrade`, `override`, `extend`,
`deadlines`, `export` and `similarity`. Each one refuses, with a message and nothing written, what it cannot
do as asked: an unknown learner, task or test, a policy with a typo, a gradebook it cannot use."""
from __future__ import annotations

import getpass
import os
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from grader.course import COURSE
from grader.gradebook import adjustments, canvas_push, exports, grades, regrade
from grader.gradebook.similarity import THRESHOLD, similarity
from grader.gradebook.store import Gradebook, GradebookError
from grader.isolation import levels
from grader.running import runner

OK, INCOMPLETE, USAGE = 0, 3, 2


def add_commands(commands) -> None:
    folder_help = "the batch's folder (grade --out-dir): it holds gradebook.sqlite"

    cmd = commands.add_parser("regrade", help="grade again what a changed suite graded; print who gained or lost what")
    cmd.add_argument("folder", type=Path, metavar="DIR", help=folder_help)
    cmd.add_argument("--tasks", nargs="+", metavar="TASK", help="grade these tasks again, whatever their suite's version")
    cmd.add_argument("--learners", nargs="+", metavar="NAME", help="grade these learners again, whatever the version")
    cmd.add_argument("--dry-run", action="store_true", help="say what would be graded again, and grade nothing")
    cmd.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel (default 1)")
    cmd.add_argument("--seed", type=int, help="as given to the batch's grade --seed, if it was (default: drawn per "
                                              "submission, as a batch draws it)")
    cmd.add_argument("--isolation", choices=levels.CHOICES, help="as for grade (default auto)")
    cmd.add_argument("--submission-timeout", type=float, default=runner.RUN_LIMIT_S, metavar="SECONDS",
                     help=f"wall-time limit of one submission's grading (default {runner.RUN_LIMIT_S:g})")
    cmd.set_defaults(command=_regrade)

    cmd = commands.add_parser("override", help="set a learner's points on a test or a task, with a reason")
    cmd.add_argument("folder", type=Path, metavar="DIR", help=folder_help)
    cmd.add_argument("learner", metavar="LEARNER", help="the learner (their folder in DIR)")
    cmd.add_argument("task", metavar="TASK", help="task name or number")
    cmd.add_argument("--test", metavar="ID", help="the test's id as the report gives it (default: the whole task)")
    points = cmd.add_mutually_exclusive_group(required=True)
    points.add_argument("--points", type=float, help="the points it earns from now on, regrades included")
    points.add_argument("--withdraw", action="store_true", help="withdraw the override in force")
    cmd.add_argument("--reason", required=True, help="why: kept with it, shown in the reports")
    cmd.add_argument("--by", default=_user(), help="who sets it (default: this user)")
    cmd.set_defaults(command=_override)

    cmd = commands.add_parser("extend", help="give a learner a later deadline on a task")
    cmd.add_argument("folder", type=Path, metavar="DIR", help=folder_help)
    cmd.add_argument("learner", metavar="LEARNER", help="the learner (their folder in DIR)")
    cmd.add_argument("task", metavar="TASK", help="task name or number")
    cmd.add_argument("--until", required=True, help="their deadline: an ISO 8601 time with its UTC offset")
    cmd.add_argument("--reason", required=True, help="why: kept with it")
    cmd.add_argument("--by", default=_user(), help="who grants it (default: this user)")
    cmd.set_defaults(command=_extend)

    cmd = commands.add_parser("deadlines", help="set the late policy (deadlines, penalty, cap, grace) from a TOML file")
    cmd.add_argument("folder", type=Path, metavar="DIR", help=folder_help)
    cmd.add_argument("policy", type=Path, metavar="POLICY.toml",
                     help="a [deadlines] table (task = its deadline) and a [late] table (penalty_percent, per, "
                          "cap_percent, grace_minutes): the instructors' guide, \"A term\"")
    cmd.add_argument("--by", default=_user(), help="who sets it (default: this user)")
    cmd.set_defaults(command=_deadlines)

    cmd = commands.add_parser("export", help="the current grades as Canvas's or Moodle's grade import CSV")
    cmd.add_argument("folder", type=Path, metavar="DIR", help=folder_help)
    cmd.add_argument("--roster", type=Path, required=True, metavar="CSV",
                     help="each learner's LMS identity: `learner` and any of " + ", ".join(exports.ROSTER_FIELDS))
    cmd.add_argument("--canvas", type=Path, metavar="OUT", help="write Canvas's Gradebook import CSV here")
    cmd.add_argument("--moodle", type=Path, metavar="OUT", help="write Moodle's grade import CSV here")
    canvas = cmd.add_argument_group(f"straight into Canvas (canvasapi; the token in ${canvas_push.TOKEN_ENV}): a dry "
                                    "run that reads the course and says what would be posted, then --push")
    canvas.add_argument("--canvas-url", metavar="URL", help="the Canvas instance, e.g. https://canvas.example.edu")
    canvas.add_argument("--canvas-course", type=int, metavar="ID", help="the course's id in Canvas")
    canvas.add_argument("--assignment", action="append", default=[], metavar="TASK=ID",
                        help="post a task's final points to this Canvas assignment (repeat per task)")
    canvas.add_argument("--push", action="store_true", help="post the grades (without it: the dry run only)")
    cmd.set_defaults(command=_export)

    cmd = commands.add_parser("similarity", help="pairs of learners whose modules of a task share more code than "
                                                 "chance (a reason to read both, never a verdict)")
    cmd.add_argument("folder", type=Path, metavar="DIR", help=folder_help)
    cmd.add_argument("task", metavar="TASK", help="task name or number")
    cmd.add_argument("--threshold", type=float, default=THRESHOLD,
                     help=f"list a pair when this share of one module is found in the other (default {THRESHOLD:g})")
    cmd.add_argument("--html", type=Path, metavar="OUT",
                     help="the side-by-side report (default: DIR/similarity-TASK.html)")
    cmd.set_defaults(command=_similarity)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _open(folder: Path, console) -> Gradebook | None:
    try:
        return Gradebook.open(folder, create=False)
    except GradebookError as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        return None


def _regrade(args, tasks, console) -> int:
    from grader.cli import grading_template, write_class_files
    book = _open(args.folder, console)
    if book is None:
        return USAGE
    with book:
        try:
            named_tasks = [COURSE.task_named(t) for t in args.tasks] if args.tasks else None
        except KeyError as exc:
            console.print(f"[red]{escape(exc.args[0])}[/]")
            return USAGE
        unknown = sorted(set(args.learners or ()) - set(book.learners()))
        if unknown:
            console.print(f"[red]no learner {escape(', '.join(unknown))} in {escape(str(book.path))}[/]")
            return USAGE
        planned = regrade.plan(book, COURSE, named_tasks, args.learners)
        missing = [item for item in planned if item.missing]
        if not planned:
            console.print("nothing to grade again: every grading is of the course's current suites")
            return OK
        console.print(_plan_table(planned))
        if args.dry_run:
            console.print(f"dry run: {len(planned) - len(missing)} submission(s) would be graded again; nothing was")
            return INCOMPLETE if missing else OK
        try:
            template = grading_template(args, COURSE.tasks(), [Path(item.path) for item in planned if not item.missing],
                                        args.folder, console)
        except levels.IsolationUnavailable:         # said by grading_template
            return USAGE
        with console.status("grading again"):
            deltas = regrade.regrade(book, COURSE, planned, template, args.folder, jobs=args.jobs,
                                     limit_s=args.submission_timeout)
        console.print(_delta_table(deltas))
        if any(delta.changes for delta in deltas):
            console.print(_per_test_table(deltas))
        for item in missing:
            console.print(f"[red]{escape(item.learner)}: not graded again, {escape(item.path)} is no longer there[/]")
        notes = [note for grade in grades.current(book, COURSE, [d.learner for d in deltas]) for note in grade.notes]
        for note in notes:
            console.print(f"[yellow]{escape(note)}[/]")
        unwritten = write_class_files(args.folder, book)
    return INCOMPLETE if missing or unwritten else OK


def _plan_table(planned: list[regrade.Planned]) -> Table:
    table = Table(title="to grade again", title_justify="left")
    for column in ("learner", "tasks", "from"):
        table.add_column(column)
    for item in planned:
        where = "[red]no longer there[/]" if item.missing else escape(item.path)
        table.add_row(escape(item.learner), ", ".join(t.name for t in item.tasks), where)
    return table


def _delta_table(deltas: list[regrade.Delta]) -> Table | str:
    """Who gained, who lost, and which test changed why: the losses first."""
    changed = [delta for delta in deltas if delta.changes]
    said = f"{len(deltas)} task grading(s) redone: {len(changed)} changed, {len(deltas) - len(changed)} unchanged"
    if not changed:
        return said
    table = Table(title="deltas", title_justify="left", caption=said)
    for column in ("learner", "task", "before", "after", "gained", "test", "was", "is", "why"):
        table.add_column(column, overflow="fold")
    for delta in sorted(changed, key=lambda d: (d.gained, d.learner, d.task)):
        for i, change in enumerate(delta.changes):
            head = [escape(delta.learner), delta.task, f"{delta.before:g}", f"{delta.after:g}", f"{delta.gained:+g}"] \
                if i == 0 else [""] * 5
            table.add_row(*head, escape(change.test.rsplit("::", 1)[-1]), change.before, change.after,
                          escape(change.why))
    return table


def _per_test_table(deltas: list[regrade.Delta]) -> Table:
    """Each test that changed: how many learners gained and lost points on it, and who."""
    by_test: dict[str, tuple[list[str], list[str]]] = {}
    for delta in deltas:
        for change in delta.changes:
            gained, lost = by_test.setdefault(change.test, ([], []))
            (gained if change.gained > 0 else lost if change.gained < 0 else []).append(delta.learner)
    table = Table(title="per test", title_justify="left")
    for column in ("test", "gained", "lost", "who lost"):
        table.add_column(column, overflow="fold")
    for test, (gained, lost) in sorted(by_test.items(), key=lambda item: -len(item[1][1])):
        table.add_row(escape(test.rsplit("::", 1)[-1]), str(len(gained)), str(len(lost)), escape(", ".join(sorted(lost)[:20])))
    return table


def _override(args, tasks, console) -> int:
    return _adjust(args, console, lambda book: adjustments.set_override(
        book, COURSE, args.learner, args.task, args.test, None if args.withdraw else args.points, args.reason, args.by))


def _extend(args, tasks, console) -> int:
    return _adjust(args, console, lambda book: adjustments.set_extension(
        book, COURSE, args.learner, args.task, args.until, args.reason, args.by))


def _deadlines(args, tasks, console) -> int:
    try:
        text = args.policy.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        console.print(f"[red]{escape(str(exc))}; nothing was written[/]")
        return USAGE
    return _adjust(args, console, lambda book: adjustments.set_policy(book, COURSE, text, args.by))


def _adjust(args, console, adjust) -> int:
    """One hand-set change to the gradebook, said; then the class files rewritten from it."""
    book = _open(args.folder, console)
    if book is None:
        return USAGE
    with book:
        try:
            said = adjust(book)
        except adjustments.Refused as exc:
            console.print(f"[red]{escape(str(exc))}; nothing was written[/]")
            return USAGE
        console.print(escape(said))
        return _rewrite_class_files(args.folder, book)


def _export(args, tasks, console) -> int:
    wanted = [(kind, path, render) for kind, path, render in
              (("canvas", args.canvas, exports.canvas_csv), ("moodle", args.moodle, exports.moodle_csv)) if path]
    if not wanted and not args.canvas_url:
        console.print("[red]give --canvas OUT, --moodle OUT, --canvas-url URL, or several[/]")
        return USAGE
    try:
        assignments = _assignments(args) if args.canvas_url else {}
    except ValueError as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        return USAGE
    book = _open(args.folder, console)
    if book is None:
        return USAGE
    with book:
        try:
            roster = exports.read_roster(args.roster)
            current = grades.current(book, COURSE)
            texts = [(kind, path, render(current, roster)) for kind, path, render in wanted]
        except exports.ExportError as exc:
            console.print(f"[red]{escape(str(exc))}[/]")
            return USAGE
        for kind, path, text in texts:
            rows = exports.write(path, text)
            book.record_export(kind, str(path.absolute()), rows)
            console.print(f"{kind}: {rows} learner(s) -> {escape(str(path))}")
        if args.canvas_url:
            try:
                said = _canvas(args, assignments, current, roster, book)
            except exports.ExportError as exc:
                console.print(f"[red]{escape(str(exc))}[/]")
                return USAGE
            for line in said:
                console.print(escape(line))
        for learner in exports.never_graded(current, roster):
            console.print(f"[yellow]{escape(learner)} is in the roster but has no grading: their cells are empty[/]")
        notes = [f"{grade.learner}: {note}" for grade in current for note in grade.notes]
        for note in notes:
            console.print(f"[yellow]{escape(note)}[/]")
    return OK


def _similarity(args, tasks, console) -> int:
    try:
        task = COURSE.task_named(args.task)
    except KeyError as exc:
        console.print(f"[red]{escape(exc.args[0])}[/]")
        return USAGE
    if not 0 < args.threshold <= 1:
        console.print(f"[red]--threshold {args.threshold:g}: expected a share above 0, at most 1[/]")
        return USAGE
    book = _open(args.folder, console)
    if book is None:
        return USAGE
    html = args.html or args.folder / f"similarity-{task.name}.html"
    with book, console.status(f"comparing every pair of {task.name}'s modules"):
        found = similarity(book, task, html, args.threshold)
    table = Table(title=f"{task.name}: pairs sharing at least {args.threshold:.0%} of one module", title_justify="left",
                  caption=f"{len(found.compared)} modules compared; a pair is a reason to read both, never a verdict")
    for column in ("learner", "shares", "with", "who shares", "tokens"):
        table.add_column(column)
    for pair in found.pairs:
        table.add_row(escape(pair.first), f"{pair.first_shared:.0%}", escape(pair.second), f"{pair.second_shared:.0%}",
                      str(pair.tokens))
    console.print(table)
    for learner, why in found.not_compared.items():
        console.print(f"[yellow]{escape(learner)}: not compared: {escape(why)}[/]")
    if len(found.compared) >= 2:
        console.print(f"side by side: {escape(str(html))}")
    return OK


def _assignments(args) -> dict[str, int]:
    """--assignment TASK=ID, each task named as the course names it."""
    if args.canvas_course is None or not args.assignment:
        raise ValueError("--canvas-url needs --canvas-course ID and at least one --assignment TASK=ID")
    if not os.environ.get(canvas_push.TOKEN_ENV):
        raise ValueError(f"--canvas-url needs a Canvas API token in ${canvas_push.TOKEN_ENV}")
    found = {}
    for given in args.assignment:
        task, _, number = given.partition("=")
        if not number.strip().isdigit():
            raise ValueError(f"--assignment {given}: expected TASK=ID, e.g. 01=1234")
        try:
            found[COURSE.task_named(task.strip()).name] = int(number)
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
    return found


def _canvas(args, assignments, current, roster, book) -> list[str]:
    """The dry run's plan, and with --push the grades posted (and recorded as an export)."""
    from canvasapi import Canvas
    canvas = Canvas(args.canvas_url, os.environ[canvas_push.TOKEN_ENV])
    planned = canvas_push.plan(canvas, args.canvas_course, assignments, current, roster)
    said = canvas_push.described(planned)
    if not args.push:
        return [*said, "dry run: nothing was posted; add --push to post these grades"]
    said += canvas_push.push(canvas, args.canvas_course, planned)
    book.record_export("canvas push", f"{args.canvas_url} course {args.canvas_course}",
                       sum(len(item.grades) for item in planned))
    return said


def _rewrite_class_files(folder: Path, book: Gradebook) -> int:
    from grader.cli import write_class_files
    return INCOMPLETE if write_class_files(folder, book) else OK
