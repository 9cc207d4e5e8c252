"""grader.suite.plot_reading reads what a matplotlib figure saved as SVG shows: each axis's scale
from its ticks, the lines and the shaded bands in data coordinates. The figures here are drawn by
matplotlib itself, with the data known, so every reading is checked against what was plotted."""
import io

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402  (after the backend is chosen)

from grader.suite import plot_reading  # noqa: E402
from grader.suite.plot_reading import FigureUnreadable, parse_number, read_figure  # noqa: E402

STEPS = np.arange(1, 121)
LOSS = 2.0 + 4.0 / STEPS ** 0.5
PIXEL = 0.5      # matplotlib rounds coordinates to six decimals; a reading is exact to far below a pixel


def svg(draw, fonttype="none", **savefig) -> bytes:
    figure = Figure(figsize=(6, 4))
    draw(figure.subplots())
    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": fonttype}):
        figure.savefig(buffer, format="svg", **savefig)
    return buffer.getvalue()


@pytest.mark.parametrize("x_scale,y_scale", [("linear", "linear"), ("log", "linear"), ("log", "log"), ("linear", "log")])
def test_scales_are_read_off_the_ticks(x_scale, y_scale):
    def draw(axes):
        axes.plot(STEPS, LOSS)
        axes.set_xscale(x_scale)
        axes.set_yscale(y_scale)

    (axes,) = read_figure(svg(draw))
    assert (axes.x.scale.kind, axes.y.scale.kind) == (x_scale, y_scale)
    assert axes.lines_following(STEPS, LOSS, PIXEL) == [0]
    assert not axes.lines_following(STEPS, LOSS * 1.05, PIXEL)          # another curve is not this one
    drawn = axes.data(axes.lines[0])
    assert np.allclose(drawn[:, 0], STEPS, rtol=1e-4) and np.allclose(drawn[:, 1], LOSS, rtol=1e-4)


def test_a_log_axis_with_two_labels_is_read_from_its_minor_ticks():
    steps = np.arange(5, 305, 5)          # 10 and 100 are the only powers of ten in view

    def draw(axes):
        axes.semilogx(steps, 2.0 + 6.0 / steps ** 0.4)

    (axes,) = read_figure(svg(draw))
    assert len(axes.x.scale.ticks) == 2 and axes.x.scale.kind == "log"
    assert axes.lines_following(steps, 2.0 + 6.0 / steps ** 0.4, PIXEL)


def test_a_log_axis_with_two_ticks_in_all_is_read_from_their_notation():
    def draw(axes):
        axes.loglog(STEPS, 1.9 + 1.7 / STEPS ** 0.5)     # 1.9 to 3.6: ticks at 2x10^0 and 3x10^0 only

    (axes,) = read_figure(svg(draw))
    assert axes.y.scale.kind == "log" and [v for _, v in axes.y.scale.ticks] == [3.0, 2.0]


def test_bands_drawn_as_paths_or_as_offset_uses_are_read():
    low, high = LOSS - 0.2, LOSS + 0.3
    for linewidth in (None, 0):          # with linewidth 0 matplotlib draws the polygon once and <use>s it

        def draw(axes, linewidth=linewidth):
            axes.fill_between(STEPS, low, high, alpha=0.3, **({} if linewidth is None else {"linewidth": 0}))
            axes.plot(STEPS, LOSS)
            axes.set_xscale("log")
            axes.legend(["band", "mean"])

        (axes,) = read_figure(svg(draw))
        assert len(axes.lines) == 1          # the legend's handles are not lines of the Axes
        assert axes.band_miss(STEPS, low, high)[0] <= PIXEL
        assert axes.band_miss(STEPS, low, high + 0.2)[0] > 5 * PIXEL


def test_markers_only_lines_are_read_at_their_markers():
    def draw(axes):
        axes.plot(STEPS, LOSS, "o", markersize=2)
        axes.set_xscale("log")

    (axes,) = read_figure(svg(draw))
    assert axes.lines_following(STEPS, LOSS, PIXEL) == [0]


def test_text_drawn_as_paths_is_named_as_the_reason():
    def draw(axes):
        axes.plot(STEPS, LOSS)

    (axes,) = read_figure(svg(draw, fonttype="path"))
    assert axes.x.scale is None and "svg.fonttype" in axes.x.problem


@pytest.mark.parametrize("label,value", [("0.5", 0.5), ("\u22121", -1.0), ("10^2", 100.0), ("2\u00d710^1", 20.0),
                                         ("10^\u22123", 1e-3), ("$\\mathdefault{10^{2}}$", 100.0), ("step", None)])
def test_tick_labels_parse_as_matplotlib_writes_them(label, value):
    assert parse_number(label) == value


@pytest.mark.parametrize("data,reason", [(b"\x89PNG\r\n", "not an SVG"),
                                         (b'<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "b">]><svg/>', "entities"),
                                         (b"<svg xmlns='http://www.w3.org/2000/svg'><g", "well-formed"),
                                         (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "no matplotlib Axes")])
def test_what_is_not_a_figure_says_why(data, reason):
    with pytest.raises(FigureUnreadable, match=reason):
        read_figure(data)


def test_lines_of_a_collection_and_lines_named_by_gid_are_lines_of_the_axes():
    from matplotlib.collections import LineCollection

    def draw(axes):
        axes.plot(STEPS, LOSS, gid="seed-0")
        axes.add_collection(LineCollection([np.c_[STEPS, LOSS * 1.1], np.c_[STEPS, LOSS * 1.2]]))
        axes.plot(STEPS, LOSS * 1.3, label="mean")
        axes.legend()                                 # its handle is no line of the Axes
        axes.set_xscale("log")

    (axes,) = read_figure(svg(draw))
    assert len(axes.lines) == 4, [len(line) for line in axes.lines]
    for scale in (1.0, 1.1, 1.2, 1.3):
        assert len(axes.lines_following(STEPS, LOSS * scale, PIXEL)) == 1, scale


def test_a_figure_of_too_many_points_is_refused_before_it_is_held():
    def draw(axes):
        axes.plot(STEPS, LOSS)

    data = svg(draw).decode()
    flood = "M 0 0 " + "".join(f"L {i % 997} {i % 991} " for i in range(300_000))
    data = data.replace('<g id="axes_1">', f'<g id="axes_1"><g id="line2d_999"><path d="{flood}"/></g>', 1)
    with pytest.raises(FigureUnreadable, match="more than 200,000 points"):
        read_figure(data.encode())
    marks = "".join(f'<use x="{i % 997}" y="{i % 991}"/>' for i in range(210_000))   # markers count as points
    with pytest.raises(FigureUnreadable, match="more than 200,000 points"):
        read_figure(svg(draw).decode().replace('<g id="axes_1">', f'<g id="axes_1"><g id="line2d_999">{marks}</g>',
                                                1).encode())


def test_a_figure_of_too_many_elements_is_refused_before_they_are_built():
    def draw(axes):
        axes.plot(STEPS, LOSS)

    assert read_figure(svg(draw))          # the control: the figure itself reads
    groups = "<g/>" * 300_000              # draw nothing, cost a tree of elements
    with pytest.raises(FigureUnreadable, match="more than 250,000 elements"):
        read_figure(svg(draw).decode().replace('<g id="axes_1">', f'<g id="axes_1">{groups}', 1).encode())


def test_distances_measured_in_chunks_are_the_distances():
    rng = np.random.default_rng(0)
    points, polyline = rng.normal(size=(3000, 2)) * 100, np.cumsum(rng.normal(size=(700, 2)), axis=0)
    a, b = polyline[:-1], polyline[1:]
    t = np.clip(((points[:, None] - a) * (b - a)).sum(axis=2) / ((b - a) ** 2).sum(axis=1), 0, 1)
    brute = np.linalg.norm(points[:, None] - (a + t[..., None] * (b - a)), axis=2).min(axis=1)
    assert np.allclose(plot_reading.distance_to_polyline(points, polyline), brute)
