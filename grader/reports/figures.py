"""The figures the HTML pages embed, drawn from a score report's data as PNG bytes.

Matplotlib's object API only (a `Figure` on an Agg canvas, no pyplot): drawing keeps no global
state and needs no display. Every function takes data straight from a report, which may come
from learner code, so anything malformed is skipped rather than trusted, and every text is drawn
as the characters it is: never parsed as mathtext (`$...$`) or handed to TeX, whatever the
caller's matplotlib settings say.
"""
from __future__ import annotations

import functools
import io
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

PHASES = ("data_loading", "forward", "backward", "optimizer")
_COLORS = {"learner": "#1f6feb", "reference": "#afb8c1", "floor": "#2da44e", "pass_line": "#cf222e",
           "data_loading": "#bf8700", "forward": "#1f6feb", "backward": "#8250df", "optimizer": "#2da44e",
           "other": "#d0d7de"}
PLAIN_TEXT: dict[RcKeyType, Any] = {"text.usetex": False, "text.parse_math": False}
MAX_STEPS_DRAWN = 40        # a profile holds a handful of steps; thousands would make a figure too tall to draw
MAX_LABEL_CHARS = 40        # of a learner's label (a step's name): a tick label, not a paragraph


def _drawn_as_text(draw):
    """Draw with PLAIN_TEXT settings, and without the warnings a learner's characters may cause
    (a glyph the font lacks): a figure is part of a page, never a message on the console."""
    @functools.wraps(draw)
    def drawn(*args, **kwargs):
        import matplotlib
        with matplotlib.rc_context(PLAIN_TEXT), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return draw(*args, **kwargs)
    return drawn


@_drawn_as_text
def loss_curve_png(artifact: dict) -> bytes | None:
    """Exercise 02's convergence run: the learner's training loss beside the reference loop's,
    the source's loss floor, the line the eval loss must end under, and both final eval losses."""
    from matplotlib.figure import Figure

    learner, reference = _curve(artifact.get("learner")), _curve(artifact.get("reference"))
    if learner is None and reference is None:
        return None
    figure = Figure(figsize=(6.4, 3.6), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    end = _number(artifact.get("max_steps"))
    # The reference is drawn wide and pale underneath, so that a learner's curve lying on it
    # (a correct loop reproduces it) still shows both.
    for name, curve, width in (("reference loop", reference, 5.0), ("your loop", learner, 1.6)):
        if curve is None:
            continue
        color = _COLORS["reference" if curve is reference else "learner"]
        axes.plot(curve["step"], curve["loss"], color=color, linewidth=width, alpha=0.55 if curve is reference else 1.0,
                  label=f"{name}: training loss")
        if curve["final_eval_loss"] is not None and end is not None:
            axes.plot([end], [curve["final_eval_loss"]], "o", color=color,
                      label=f"{name}: final eval loss {curve['final_eval_loss']:.3f}")
    for key, label in (("floor", "the corpus's loss floor"), ("pass_line", "pass line for the eval loss")):
        value = _number(artifact.get(key))
        if value is not None:
            axes.axhline(value, color=_COLORS[key], linewidth=1, linestyle=":", label=f"{label} ({value:.3f})")
    axes.set_xlabel("step")
    axes.set_ylabel("loss (nats / token)")
    axes.set_title("Training from scratch on the corpus")
    axes.legend(fontsize=7)
    return _png(figure)


@_drawn_as_text
def step_breakdown_png(artifact: dict) -> bytes | None:
    """Exercise 05: where each profiled step's wall time goes, as the learner's
    `step_breakdown` read it (phases stacked, the rest of the step as "other")."""
    from matplotlib.figure import Figure

    rows = [row for row in artifact.get("steps") or [] if isinstance(row, dict) and _number(row.get("wall_ms"))]
    if not rows:
        return None
    shown = rows[:MAX_STEPS_DRAWN]
    figure = Figure(figsize=(6.4, 0.9 + 0.45 * len(shown)), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    positions = list(range(len(shown)))        # not the labels themselves: two steps may share a name
    left = [0.0] * len(shown)
    for phase in (*PHASES, "other"):
        if phase == "other":
            widths = [max(0.0, row["wall_ms"] - sum(_number(row.get(f"{p}_ms")) or 0.0 for p in PHASES)) for row in shown]
        else:
            widths = [max(0.0, _number(row.get(f"{phase}_ms")) or 0.0) for row in shown]
        axes.barh(positions, widths, left=left, color=_COLORS[phase], label=phase.replace("_", " "))
        left = [a + b for a, b in zip(left, widths)]
    axes.set_yticks(positions, [_label(f"step {row.get('step')}") for row in shown])
    axes.invert_yaxis()
    axes.set_xlabel("milliseconds")
    more = f" (its first {len(shown)} of {len(rows)} steps)" if len(shown) < len(rows) else ""
    axes.set_title(f"Your step breakdown of {_label(artifact.get('profile', 'the profile'))}{more}")
    axes.legend(fontsize=7, ncols=5, loc="upper center", bbox_to_anchor=(0.5, -0.25 - 0.1 / len(shown)))
    return _png(figure)


@dataclass(frozen=True)
class ArtifactFigure:
    draw: Callable[[dict], bytes | None]
    alt: str
    caption: str                 # after the test's title


# The figures a report draws from its tests' artifacts, by the artifact's name (a suite fills
# `artifacts[name]`, see grader.session.plugin): a new figure is one entry here and its drawing.
ARTIFACT_FIGURES = {
    "loss_curve": ArtifactFigure(loss_curve_png, "loss curves: yours and the reference loop's",
                                 "your training loss beside the reference loop's, with the same configuration"),
    "step_breakdown": ArtifactFigure(step_breakdown_png, "your step breakdown",
                                     "your step_breakdown of the shipped training-step profile"),
}


@_drawn_as_text
def score_histogram_png(percents: list[float]) -> bytes:
    """A class's score distribution, in bins of 10 percentage points."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 3.0), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    axes.hist(percents, bins=[i * 10 for i in range(11)], color=_COLORS["learner"], edgecolor="white")
    axes.set_xlabel("score (%)")
    axes.set_ylabel("submissions")
    axes.set_xlim(0, 100)
    axes.set_title(f"Score distribution ({len(percents)} submissions)")
    return _png(figure)


def _curve(data) -> dict | None:
    if not isinstance(data, dict):
        return None
    pairs = [(step, loss) for step, loss in zip(data.get("step") or [], data.get("loss") or [])
             if _number(step) is not None and _number(loss) is not None]
    if not pairs:
        return None
    return {"step": [s for s, _ in pairs], "loss": [loss for _, loss in pairs],
            "final_eval_loss": _number(data.get("final_eval_loss"))}


def _label(value) -> str:
    """A learner's value as a short line of drawable characters: a lone surrogate or a control
    character (which the font engine refuses, or which reorders the text) shows as `?`."""
    text = " ".join(str(value).split())                # one line: no newline stacks up a tick label
    text = "".join(c if c.isprintable() else "?" for c in text.encode("utf-8", "replace").decode("utf-8"))
    return text if len(text) <= MAX_LABEL_CHARS else text[:MAX_LABEL_CHARS - 1] + "…"


def _number(value) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _png(figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
