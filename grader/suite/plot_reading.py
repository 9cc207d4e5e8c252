"""Reading a figure a learner's code saved with matplotlib as SVG, in the test's own process: its
axes, each axis's scale read off its ticks, and the lines and shaded bands drawn, in pixels and
in data coordinates. Nothing of the learner's runs here: the file is parsed as XML, never
rendered or imported, so what is read is what the figure shows.

What the reading relies on (matplotlib's SVG backend, with `svg.fonttype = "none"` so that text
stays text):
- each Axes is a group `axes_N`; its tick marks are groups `xtick_N` / `ytick_N`, each holding the
  tick's marker (a `<use>` at the tick's pixel position) and, when the tick is labelled, its label
  as `<text>` (a power of ten as mathtext: the exponent in a smaller font);
- a line the Axes draws (`plot`, `semilogx`, ...) is a group `line2d_N` directly inside the Axes
  group, its vertices in a `<path d="M x y L x y ...">` (or markers only: `<use>` per point); a
  `LineCollection_N` holds one such path per line; an artist given a `gid` is a group of that
  name, read by what it holds (an unfilled path is a line, a filled one a polygon); legend
  handles sit inside the `legend_N` group and are not lines of the Axes;
- a shaded region (`fill_between`) is a `FillBetweenPolyCollection_N` (or `PolyCollection_N`)
  group, each polygon a closed `<path>`, or a `<use>` of a path defined once, at an offset;
  `fill` makes a `patch_N` polygon.

An axis's scale is decided by its labelled ticks: pixel position against tick value is affine on
a linear axis and affine in log10(value) on a log axis. Pixel y grows downwards in SVG; the
scales take care of it.
"""
from __future__ import annotations

import io
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np

SVG = "{http://www.w3.org/2000/svg}"
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
# Tick positions and labels are exact in the file (six decimals of a pixel): a scale whose ticks
# miss their fit by more than this is not of that kind.
TICK_FIT_PX = 0.05
FILE_ROUNDING_PX = 1e-3         # coordinates are written with six decimals; a scale read from ticks adds as little
HALF_PIXEL = 0.5                # a drawn point is where the data says, up to matplotlib's path simplification (1/9 px)
MIN_LABELLED_TICKS = 3          # two points fit any affine map: a third decides linear against log
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_PATH_TOKEN = re.compile(r"[A-Za-z]|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_FONT_SIZE = re.compile(r"font-size:\s*([\d.]+)")
FIGURE_VERTEX_LIMIT = 200_000   # the points of every path, marker and use of a figure together
FIGURE_ELEMENT_LIMIT = 250_000  # its XML elements (a figure of the course's plots holds a few hundred): above the
                                # point limit, which markers (an element each) then meet first
DISTANCE_CHUNK = 1 << 20        # points x segments measured at once: memory bounded whatever the sizes
# Groups of an Axes that draw no data: its axes' ticks and labels, its legend (whose handles are
# not lines of the Axes), its texts.
NOT_DRAWN_DATA = ("matplotlib.axis_", "legend_", "text_")


class FigureUnreadable(ValueError):
    """The file is not an SVG figure this reader understands; the message says why."""


class FigureTooLarge(FigureUnreadable):
    """The figure draws more than the reader reads (`FIGURE_VERTEX_LIMIT`, `FIGURE_ELEMENT_LIMIT`)."""


@dataclass
class _VertexBudget:
    """The vertices a figure's reading may still take: the file is learner data, read in the
    grading's own process, and a path of a million vertices would cost that process gigabytes."""
    left: int

    def take(self) -> None:
        """One more point read."""
        self.left -= 1
        if self.left < 0:
            raise FigureTooLarge(f"the figure draws more than {FIGURE_VERTEX_LIMIT:,} points in all; a plot of the "
                                 "data asked for draws a few thousand (plot each point once)")


@dataclass
class Scale:
    """pixel = offset + slope * f(value), f the identity (linear) or log10 (log)."""
    kind: str
    offset: float
    slope: float
    ticks: list[tuple[float, float]]        # (pixel, value) of the labelled ticks it was read from

    def to_pixel(self, values) -> np.ndarray:
        values = np.asarray(values, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.log10(values) if self.kind == "log" else values
        return self.offset + self.slope * f

    def to_data(self, pixels) -> np.ndarray:
        f = (np.asarray(pixels, dtype=float) - self.offset) / self.slope
        return 10.0 ** f if self.kind == "log" else f


@dataclass
class Axis:
    scale: Scale | None
    problem: str = ""                        # why there is no scale

    @property
    def readable(self) -> Scale:
        """The scale, for a caller that has checked there is one (a test asserts it first)."""
        if self.scale is None:
            raise FigureUnreadable(self.problem or "the axis has no readable scale")
        return self.scale


@dataclass
class Axes:
    id: str
    x: Axis
    y: Axis
    lines: list[np.ndarray] = field(default_factory=list)     # each (k, 2): the vertices of one line, in pixels
    fills: list[np.ndarray] = field(default_factory=list)     # each (k, 2): one shaded polygon, in pixels

    def data(self, pixels: np.ndarray) -> np.ndarray:
        """Pixel vertices as (x, y) data points, through both axes' scales."""
        return np.column_stack([self.x.readable.to_data(pixels[:, 0]), self.y.readable.to_data(pixels[:, 1])])

    def pixels(self, x, y) -> np.ndarray:
        return np.column_stack([self.x.readable.to_pixel(x), self.y.readable.to_pixel(y)])

    def lines_following(self, x, y, tolerance_px: float = HALF_PIXEL) -> list[int]:
        """The indices of the lines that draw the curve through the points (x, y), in order of x."""
        curve = self.pixels(x, y)
        return [i for i, line in enumerate(self.lines) if line_follows(line, curve, tolerance_px)]

    def band_miss(self, x, low, high) -> tuple[float, float] | None:
        """How far the best-fitting shaded polygon is from spanning [low, high] at each x: the
        largest miss in pixels and the x where it is; None when nothing is shaded."""
        x_pixels = self.x.readable.to_pixel(x)
        edges = np.sort(np.column_stack([self.y.readable.to_pixel(low), self.y.readable.to_pixel(high)]), axis=1)
        best = None
        for polygon in self.fills:
            misses = []
            for x_pixel, (bottom, top) in zip(x_pixels, edges):
                extent = vertical_extent(polygon, x_pixel)
                misses.append(np.inf if extent is None else max(abs(extent[0] - bottom), abs(extent[1] - top)))
            worst = int(np.argmax(misses))
            if best is None or misses[worst] < best[0]:
                best = (float(misses[worst]), float(np.asarray(x)[worst]))
        return best


def read_figure(data: bytes) -> list[Axes]:
    """Every Axes of an SVG figure, in the file's order."""
    if not data.lstrip().startswith((b"<?xml", b"<svg", b"<!DOCTYPE")):
        raise FigureUnreadable("the file is not an SVG document")
    if b"<!ENTITY" in data:
        raise FigureUnreadable("the SVG declares XML entities; a figure saved by matplotlib has none")
    root = _parse(data)
    if root.tag != f"{SVG}svg":
        raise FigureUnreadable(f"the document's root is <{root.tag}>, not an SVG <svg>")
    defined = {path.get("id") or "": path.get("d", "") for path in root.iter(f"{SVG}path") if path.get("id")}
    budget = _VertexBudget(FIGURE_VERTEX_LIMIT)
    axes = [_axes(group, defined, budget) for group in root.iter(f"{SVG}g")
            if re.fullmatch(r"axes_\d+", group.get("id") or "")]
    if not axes:
        raise FigureUnreadable("the SVG holds no matplotlib Axes (no group axes_N): was it saved by matplotlib?")
    return axes


def _parse(data: bytes) -> ET.Element:
    """The document's root, its elements counted as they are parsed: no more than
    FIGURE_ELEMENT_LIMIT of them is ever built (four million empty groups are 16 MB of SVG and
    would cost the grading process 400 MB)."""
    root: ET.Element | None = None
    try:
        for count, (_, element) in enumerate(ET.iterparse(io.BytesIO(data), events=("start",)), start=1):
            root = element if root is None else root
            if count > FIGURE_ELEMENT_LIMIT:
                raise FigureTooLarge(f"the SVG holds more than {FIGURE_ELEMENT_LIMIT:,} elements; a figure of the "
                                     "plots asked for holds a few hundred")
    except ET.ParseError as exc:
        raise FigureUnreadable(f"the file is not well-formed XML ({exc})") from None
    if root is None:
        raise FigureUnreadable("the file is not well-formed XML (no element)")
    return root


def _axes(group, defined: dict[str, str], budget: _VertexBudget) -> Axes:
    # (pixel, value or None, written as 10^k) of every tick mark, labelled or not
    marks: dict[str, list[tuple[float, float | None, bool]]] = {"x": [], "y": []}
    text_as_paths = {"x": False, "y": False}
    for tick in group.iter(f"{SVG}g"):
        match = re.fullmatch(r"([xy])tick_\d+", tick.get("id") or "")
        if not match:
            continue
        axis = match.group(1)
        pixel, label = _tick_pixel(tick, axis, budget), _tick_label(tick)
        if label is None:
            text_as_paths[axis] |= _draws_text_as_paths(tick)
        if pixel is not None:
            marks[axis].append((pixel, None if label is None else parse_number(label), "10^" in (label or "")))
    axes = Axes(group.get("id") or "", _axis(marks["x"], "x", text_as_paths["x"]), _axis(marks["y"], "y", text_as_paths["y"]))
    for child in group:
        if child.tag == f"{SVG}g":
            _read_drawn(child, defined, axes, budget)
    return axes


def _read_drawn(group, defined: dict[str, str], axes: Axes, budget: _VertexBudget) -> None:
    """What one artist's group inside an Axes draws, however it was drawn: a line, each line of a
    collection, a shaded band or polygon; a group named by the learner (an artist's `gid`) or one
    this reader does not know is read by what it holds."""
    group_id = group.get("id") or ""
    if group_id.startswith(NOT_DRAWN_DATA):
        return
    if group_id.startswith("line2d_"):
        vertices = _line_vertices(group, budget)
        if len(vertices):
            axes.lines.append(vertices)
    elif group_id.startswith("LineCollection_"):
        axes.lines += [v for v in (_path_vertices(path.get("d", ""), budget) for path in group.iter(f"{SVG}path"))
                       if len(v)]
    elif group_id.startswith(("FillBetweenPolyCollection_", "PolyCollection_")):
        axes.fills += [v for v in _collection_polygons(group, defined, budget) if len(v) >= 3]
    elif group_id.startswith("patch_"):
        for path in group.iter(f"{SVG}path"):
            vertices = _path_vertices(path.get("d", ""), budget)
            if len(np.unique(vertices, axis=0)) > 4:        # not the background, a spine or a frame
                axes.fills.append(vertices)
    else:
        for child in group:
            if child.tag == f"{SVG}g":
                _read_drawn(child, defined, axes, budget)
            elif child.tag == f"{SVG}path":
                vertices = _path_vertices(child.get("d", ""), budget)
                unfilled = re.search(r"fill:\s*none", child.get("style", "")) is not None
                if unfilled and len(vertices):
                    axes.lines.append(vertices)
                elif len(vertices) >= 3:
                    axes.fills.append(vertices)
        markers = _markers(group.findall(f"{SVG}use"), budget)
        if len(markers):
            axes.lines.append(markers)


def _axis(marks, name: str, text_as_paths: bool) -> Axis:
    """The scale of one axis from its tick marks. Three labelled ticks decide it: they fit an
    affine map of the value or of its log, not both. With two (a log axis spanning less than
    three powers of ten labels only two), the unlabelled ticks decide: on a log axis they sit at
    2, 3, ..., 9 times a power of ten, on a linear one at even spacing. With two ticks in all,
    the labels' notation does: `10^k` and `m×10^k` are a log formatter's."""
    distinct: dict[float, float] = {}
    for pixel, value, _ in marks:
        if value is not None:
            distinct.setdefault(value, pixel)
    if len(distinct) < 2:
        why = ("its tick labels are drawn as paths, not text: save with svg.fonttype = \"none\""
               if text_as_paths else f"it has {len(distinct)} labelled tick(s)")
        return Axis(None, f"the {name}-axis cannot be read: {why}")
    values = np.array(list(distinct))
    pixels = np.array(list(distinct.values()))
    fits = {"linear": _fit(values, pixels)}
    if (values > 0).all():
        fits["log"] = _fit(np.log10(values), pixels)
    if len(distinct) >= MIN_LABELLED_TICKS:
        good = {kind: fit for kind, fit in fits.items() if fit[2] <= TICK_FIT_PX}
    elif len({round(p, 4) for p, _, _ in marks}) >= MIN_LABELLED_TICKS:
        good = {kind: fit for kind, fit in fits.items() if _unlabelled_marks_fit(kind, fit, marks)}
    else:           # two ticks in all: only a log formatter writes its labels as powers of ten
        powers = all(power for _, value, power in marks if value is not None)
        good = {kind: fit for kind, fit in fits.items() if (kind == "log") == powers}
    if len(good) != 1:
        found = ", ".join(f"{v:g} at {p:.1f} px" for v, p in sorted(distinct.items()))
        return Axis(None, f"the {name}-axis cannot be read: its ticks ({found}) fit "
                          f"{'both a linear and a log' if good else 'neither a linear nor a log'} scale")
    kind, (offset, slope, _) = next(iter(good.items()))
    return Axis(Scale(kind, offset, slope, sorted((p, v) for v, p in distinct.items())))


def _unlabelled_marks_fit(kind: str, fit, marks) -> bool:
    pixels = np.array(sorted({round(p, 4) for p, _, _ in marks}))
    offset, slope, _ = fit
    if kind == "linear":
        gaps = np.diff(pixels)
        return bool(np.ptp(gaps) <= TICK_FIT_PX)
    values = 10.0 ** ((pixels - offset) / slope)
    mantissa = values / 10.0 ** np.floor(np.log10(values) + 1e-9)
    return bool(np.all(np.abs(mantissa - np.round(mantissa)) <= 1e-3 * mantissa))


def _collection_polygons(group, defined: dict[str, str], budget: _VertexBudget) -> list[np.ndarray]:
    """The polygons of a collection: each drawn <path> (a path with an id is a definition, not
    drawn), and each <use> of a defined path, at its offset (matplotlib draws a collection so when
    that is shorter)."""
    polygons = [_path_vertices(p.get("d", ""), budget) for p in group.iter(f"{SVG}path") if not p.get("id")]
    for use in group.iter(f"{SVG}use"):
        href = (use.get(XLINK_HREF) or use.get("href") or "").removeprefix("#")
        if href in defined:
            offset = np.array([float(use.get("x", "0") or 0), float(use.get("y", "0") or 0)])
            polygons.append(_path_vertices(defined[href], budget) + offset)
    return polygons


def _fit(f, pixels):
    slope, offset = np.polyfit(f, pixels, 1)
    return float(offset), float(slope), float(np.max(np.abs(offset + slope * f - pixels)))


def _tick_pixel(tick, axis: str, budget: _VertexBudget) -> float | None:
    for use in tick.iter(f"{SVG}use"):
        value = use.get("x" if axis == "x" else "y")
        if value is not None:
            return float(value)
    for path in tick.iter(f"{SVG}path"):            # a gridline, when the tick has no marker
        vertices = _path_vertices(path.get("d", ""), budget)
        if len(vertices) == 2 and vertices[0, 0 if axis == "x" else 1] == vertices[1, 0 if axis == "x" else 1]:
            return float(vertices[0, 0 if axis == "x" else 1])
    return None


def _tick_label(tick) -> str | None:
    """The label of a tick as text: `12`, `0.5`, `10^2`, `2x10^1`; None when it has none."""
    for text in tick.iter(f"{SVG}text"):
        pieces = []         # (text, font size, y) of each run of characters
        default_size = _font_size(text.get("style", ""))
        if text.text and text.text.strip():
            pieces.append((text.text, default_size, 0.0))
        for span in text.iter(f"{SVG}tspan"):
            if span.text:
                pieces.append((span.text, _font_size(span.get("style", "")) or default_size,
                               float(span.get("y", "0") or 0)))
        if not pieces:
            continue
        sizes = [size for _, size, _ in pieces if size]
        largest = max(sizes) if sizes else None
        base = "".join(t for t, size, _ in pieces if not size or size == largest)
        exponent = "".join(t for t, size, _ in pieces if size and size != largest)
        label = base + (f"^{exponent}" if exponent else "")
        return label.strip() or None
    return None


def _draws_text_as_paths(tick) -> bool:
    """A label group without <text>: svg.fonttype "path" draws each glyph as a <use> of a path."""
    return any(re.fullmatch(r"text_\d+", g.get("id") or "") and next(g.iter(f"{SVG}text"), None) is None
               for g in tick.iter(f"{SVG}g"))


def _font_size(style: str) -> float | None:
    match = _FONT_SIZE.search(style)
    return float(match.group(1)) if match else None


def parse_number(label: str) -> float | None:
    """A tick label's value: plain numbers (a unicode minus too), powers of ten `10^k` and
    `m x 10^k` as matplotlib's log axes write them; None for anything else."""
    text = label.replace("\u2212", "-").replace("\u00d7", "x").replace("$", "").replace(" ", "")
    text = re.sub(r"\\mathdefault\{(.*)\}", r"\1", text).replace("\\times", "x").replace("{", "").replace("}", "")
    power = re.fullmatch(r"(?:(" + _NUMBER.pattern + r")x)?(-?)10\^(-?\d+)", text)
    if power:
        mantissa = float(power.group(1)) if power.group(1) else 1.0
        value = mantissa * 10.0 ** int(power.group(3))
        return -value if power.group(2) else value
    if _NUMBER.fullmatch(text):
        value = float(text)
        return value if math.isfinite(value) else None
    return None


def _line_vertices(group, budget: _VertexBudget) -> np.ndarray:
    """A line's vertices: its path, or where it draws only markers, the markers' positions."""
    paths = [v for v in (_path_vertices(p.get("d", ""), budget) for p in group if p.tag == f"{SVG}path") if len(v)]
    if paths:
        return np.concatenate(paths)
    return _markers(group.iter(f"{SVG}use"), budget)


def _markers(uses, budget: _VertexBudget) -> np.ndarray:
    """The positions of markers drawn as `<use>`s."""
    markers = []
    for use in uses:
        if use.get("x") is not None and use.get("y") is not None:
            budget.take()
            markers.append((float(use.get("x")), float(use.get("y"))))
    return np.array(markers, dtype=float).reshape(-1, 2)


def _path_vertices(d: str, budget: _VertexBudget) -> np.ndarray:
    """The vertices of a path of straight segments (M, L, H, V and z, absolute or relative), each
    taken from `budget` as it is read."""
    tokens = (match.group() for match in _PATH_TOKEN.finditer(d))
    vertices, command = [], None
    current = np.zeros(2)
    start = np.zeros(2)
    for token in tokens:
        if token.isalpha():
            command = token
            if command in "zZ":
                current = start.copy()
            continue
        if command is None:
            raise FigureUnreadable(f"a path does not start with a command: {d[:40]!r}")
        if command in "MmLl":
            second = next(tokens, None)
            if second is None or second.isalpha():
                raise FigureUnreadable(f"a point of a path has one coordinate: {d[:40]!r}")
            point = np.array([float(token), float(second)])
            current = current + point if command.islower() else point
            if command in "Mm":
                start = current.copy()
                command = "l" if command == "m" else "L"      # further pairs after a move are lines
        elif command in "HhVv":
            axis = 0 if command in "Hh" else 1
            current = current.copy()
            current[axis] = current[axis] + float(token) if command.islower() else float(token)
        else:
            raise FigureUnreadable(f"a path uses the command {command!r}; only straight segments are read")
        budget.take()
        vertices.append(current.copy())
    return np.array(vertices, dtype=float).reshape(-1, 2)


# ---------------------------------------------------------------- comparing what is drawn with curves

def distance_to_polyline(points: np.ndarray, polyline: np.ndarray) -> np.ndarray:
    """For each point, its distance (pixels) to the nearest segment of the polyline."""
    points, polyline = np.asarray(points, float), np.asarray(polyline, float)
    if len(polyline) == 1:
        return np.linalg.norm(points - polyline[0], axis=1)
    a, b = polyline[:-1], polyline[1:]
    ab = b - a
    length2 = np.maximum((ab ** 2).sum(axis=1), 1e-18)
    step = max(1, DISTANCE_CHUNK // len(a))
    nearest = np.empty(len(points))
    for first in range(0, len(points), step):
        chunk = points[first:first + step]
        t = np.clip(((chunk[:, None, :] - a[None]) * ab[None]).sum(axis=2) / length2[None], 0.0, 1.0)
        nearest[first:first + step] = np.linalg.norm(chunk[:, None, :] - (a[None] + t[..., None] * ab[None]),
                                                     axis=2).min(axis=1)
    return nearest


def line_follows(line: np.ndarray, curve: np.ndarray, tolerance_px: float) -> bool:
    """A drawn line follows a curve (both in pixels) when each lies within the tolerance of the
    other: every drawn vertex near the curve, every point of the curve near the line."""
    line, curve = line[np.isfinite(line).all(axis=1)], curve[np.isfinite(curve).all(axis=1)]
    if not len(line) or not len(curve):
        return False
    return bool(distance_to_polyline(line, curve).max() <= tolerance_px
                and distance_to_polyline(curve, line).max() <= tolerance_px)


def vertical_extent(polygon: np.ndarray, x: float) -> tuple[float, float] | None:
    """The lowest and highest pixel y of a closed polygon along the vertical line at pixel x
    (None where the line misses it)."""
    closed = np.vstack([polygon, polygon[:1]])
    found = []
    for (x0, y0), (x1, y1) in zip(closed[:-1], closed[1:]):
        if min(x0, x1) - FILE_ROUNDING_PX <= x <= max(x0, x1) + FILE_ROUNDING_PX:
            if abs(x1 - x0) <= FILE_ROUNDING_PX:
                found += [y0, y1]
            else:
                found.append(y0 + (y1 - y0) * (x - x0) / (x1 - x0))
    return (min(found), max(found)) if found else None
