"""What a graded test declares about itself, read in one place: its points and concept (markers),
its title (the first line of its docstring), whether it needs a GPU or runs ranks of a process
group (distributed), whether it is a long visible check. The plugin, both collectors (the suites'
point totals, nbgrader's) and the notebook's test cells all read a test through `of_item` (a
collected pytest item) or `of_function` (a test function run outside pytest)."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from grader.schema.report import NO_GPU, NO_SOCKETS


@dataclass(frozen=True)
class TestMeta:
    points: float | None          # None: the test declares none (a graded suite refuses it)
    concept: str | None           # the README section a failure sends the learner to
    title: str
    gpus: int                     # CUDA devices it needs (`gpu` or `gpu(2)`): skipped, and not graded, where fewer
    distributed: bool             # runs ranks that need sockets: skipped, and not graded, at the uid level
    long: bool                    # a visible check of minutes, run only when asked for

    @property
    def gpu(self) -> bool:
        return self.gpus > 0

    def lacks_gpus(self) -> bool:
        """Whether this machine has fewer CUDA devices than the test needs."""
        if not self.gpus:
            return False
        import torch
        return torch.cuda.device_count() < self.gpus

    @property
    def may_go_ungraded(self) -> bool:
        """Whether a machine or an isolation level may lack what the test needs (`NOT_GRADED_HERE`)."""
        return self.gpu or self.distributed


def of_item(item) -> TestMeta:
    """A collected test: its markers as pytest resolves them (the closest first: the function's,
    then its class's and module's)."""
    return _meta(item.iter_markers(), getattr(item, "function", None), item.name)


def of_function(function) -> TestMeta:
    """A test function, its markers read from its decorators (`pytestmark`, the innermost first,
    which is the one pytest takes when a marker is given twice)."""
    return _meta(getattr(function, "pytestmark", []), function, function.__name__)


def _meta(marks: Iterable, function, name: str) -> TestMeta:
    closest: dict = {}
    for mark in marks:
        closest.setdefault(mark.name, mark)
    points, concept, gpu = closest.get("points"), closest.get("concept"), closest.get(NO_GPU.marker)
    return TestMeta(points=float(points.args[0]) if points is not None and points.args else None,
                    concept=concept.args[0] if concept is not None and concept.args else None,
                    title=_title(function, name), gpus=(int(gpu.args[0]) if gpu.args else 1) if gpu else 0,
                    distributed=NO_SOCKETS.marker in closest, long="long" in closest)


def _title(function, name: str) -> str:
    """The docstring's first paragraph on one line (a sentence wrapped in the source is whole), else the name."""
    doc = (getattr(function, "__doc__", None) or "").strip()
    return " ".join(doc.split("\n\n", 1)[0].split()) if doc else name.removeprefix("test_").replace("_", " ")
