"""What leaves the course, one channel per module, each a `grader` command.

The CLI walks `CHANNELS` for its commands. A channel's module gives `deliver(args, tasks)`: it
writes what the channel makes and returns the sentence that says what was written; it raises
`Refused` (or a subclass) when the course's files or the options do not fit. A student release
carries only what a learner's notebook runs (`release.LEARNER_RUNTIME`), this registry included:
there a channel's command says it needs the full course. A new channel is its module and one
line here."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LANGUAGES = ("en", "zh-CN")


class Refused(Exception):
    """What was asked cannot be delivered as asked; the message says why."""


def size_text(n_bytes: int) -> str:
    return f"{n_bytes / 1e6:.1f} MB" if n_bytes >= 1e5 else f"{n_bytes / 1e3:.1f} kB"


@dataclass(frozen=True)
class Channel:
    command: str                           # `grader <command>`
    module: str                            # grader.delivery.<module>, whose `deliver` it runs
    help: str
    add_options: Callable[[object], None]  # the command's arguments, on its argparse parser
    busy: str = ""                         # what the console says while it works, if it takes seconds


def _tasks_option(parser, help: str = "only these tasks (default: all)") -> None:
    parser.add_argument("--tasks", nargs="+", default=[], metavar="TASK", help=help)


def _release_options(parser) -> None:
    parser.add_argument("out", type=Path, metavar="OUT_DIR", help="a new or empty folder")
    _tasks_option(parser, "release only these tasks")
    parser.add_argument("--lang", choices=LANGUAGES, default="en",
                        help="the language of README.md, the course's and each exercise's (default en)")
    parser.add_argument("--classroom", action="store_true",
                        help="add the GitHub Classroom autograding workflow (visible tests, practice feedback)")


def _gradescope_options(parser) -> None:
    from grader.reports.gradescope import DEFAULT_HIDDEN_VISIBILITY, VISIBILITIES
    parser.add_argument("out", type=Path, metavar="OUT.zip")
    _tasks_option(parser, "grade only these tasks")
    parser.add_argument("--hidden-visibility", choices=VISIBILITIES, default=DEFAULT_HIDDEN_VISIBILITY,
                        help="when learners see the hidden suites' results (default after_published)")
    parser.add_argument("--wheels", type=Path, metavar="DIR", help="bundle these wheels, so that setup.sh installs offline")


def _nbgrader_options(parser) -> None:
    parser.add_argument("course_dir", type=Path, metavar="COURSE_DIR", help="created or updated")
    _tasks_option(parser)
    parser.add_argument("--lang", choices=LANGUAGES, default="en", help="language of the notebooks (default en)")
    parser.add_argument("--gpu", action="store_true",
                        help="the autograder has a CUDA GPU: GPU tests count toward the grade (default: left out)")


def _kubernetes_options(parser) -> None:
    parser.add_argument("--image", required=True, help="the course's image: the full course installed, `grader` on the PATH")
    parser.add_argument("--shards", type=int, required=True, metavar="N", help="pods to complete, each one slice")
    parser.add_argument("--parallelism", type=int, metavar="P", help="pods at once (default: every shard)")
    parser.add_argument("--claim", required=True, metavar="PVC",
                        help="the PersistentVolumeClaim holding the submissions and receiving the out-dir")
    parser.add_argument("--submissions-path", default="submissions", metavar="DIR",
                        help="the submissions' folder in the claim: one folder or zip each (default submissions)")
    parser.add_argument("--out-path", default="grading", metavar="DIR", help="the out-dir in the claim (default grading)")
    parser.add_argument("--level", choices=("sandbox", "uid"), default="sandbox",
                        help="the isolation the pods give learner code, and the security context it needs "
                             "(the instructors' guide, \"Large classes\"; default sandbox)")
    parser.add_argument("--jobs", type=int, default=1, help="gradings at once in each pod (its cores and memory follow)")
    _tasks_option(parser, "grade only these tasks")
    parser.add_argument("--gpus", type=int, default=0, help="GPUs of each pod (nvidia.com/gpu; default 0)")
    parser.add_argument("--course-root", default="/course", metavar="DIR", help="where the image holds the course")
    parser.add_argument("--course-secret", metavar="SECRET",
                        help="a Kubernetes Secret whose key grader-secret holds the course's .grader-secret, so "
                             "that every pod draws a submission's hidden inputs alike")
    parser.add_argument("--name", default="grader-batch", help="the Job's name (default grader-batch)")
    parser.add_argument("--output", "-o", type=Path, metavar="OUT.yaml", help="write here (default: standard output)")


CHANNELS = (
    Channel("k8s-job", "kubernetes", "write a Kubernetes Indexed Job that grades a batch in shards", _kubernetes_options),
    Channel("release", "release", "write the student repository (no hidden suite, no reference)", _release_options,
            busy="writing the release"),
    Channel("gradescope", "gradescope", "write the Gradescope autograder zip", _gradescope_options,
            busy="writing the autograder"),
    Channel("nbgrader", "nbgrader", "write an nbgrader course directory, one assignment per exercise", _nbgrader_options,
            busy="collecting the suites, writing the notebooks"),
)
