r"""The families this package builds, by year and paper, each with an arrow from the model it builds on.

The class tree (:mod:`~literate_transformer.family_tree`) tells how the
*code* is laid out: a family's classes subclass its parent's.  This module
tells where the *models* came from: who published each, when, and which
earlier model its paper (or its release) says it starts from.  The two
mostly agree, not always: GPT-J's file takes GPT-2's stack, where its
authors followed GPT-3's design; M2M-100's takes BART's modules, where its
architecture is fairseq's 2017 Transformer; DistilBERT's and XLM's files
assemble the package's parts, where their papers start from BERT.

:data:`LINEAGE` is the table, one :class:`Paper` a family, and the 2017
Transformer as the root: the ``[paper]`` sections of the families' records
(:mod:`~literate_transformer.core.records`, a ``models/<family>.ini`` beside
each family's file, whose comments say where a date or a parent comes
from).  Each paper names the package's module and ``transformers``' (``None`` where
``transformers`` has no such model), the year and month of the paper's
first public version (for an arXiv paper, the year and month its identifier
carries, so ``1810.04805`` is October 2018: earlier, for some, than the
conference version a chapter cites), the title, the first author, the arXiv
identifier (``None`` for a report or a software release), the keys of
the models it builds on, and a later paper whose model the same module
builds, if any (DeBERTa-v3, 2021, trains v2's architecture with ELECTRA's
objective: ELECTRA is its second parent).  An arrow skips the releases the package does not
build (Pegasus, Gemma 1, Llama 2, Qwen 1 to 2.5): it goes to the nearest
built ancestor.

:func:`plot_lineage` draws the table: time flows down, a column per branch
(encoders, encoder-decoders, decoders), the root in the middle; one branch
(and the root) or all of them.

>>> [paper.cite for paper in LINEAGE if paper.key in ("bert", "xlm", "deberta_v2", "gemma2")]
['Devlin et al. 2018', 'Lample & Conneau 2019', 'He et al. 2020, 2021', 'Gemma Team 2024']
>>> [paper.key for paper in lineage("encoder-decoder") if paper.branch != "encoder-decoder"]
['openai_gpt', 'bert']
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

from ..core.records import BRANCHES, ROOT, FamilyRecord, records

__all__ = ["BRANCHES", "Paper", "LINEAGE", "ROOT", "lineage", "plot_lineage"]

#: One family: its model, where it was published, and what it builds on (its record,
#: :class:`~literate_transformer.core.records.FamilyRecord`: ``key``, ``name``, ``hf_module``, ``branch``,
#: ``year``, ``month``, ``title``, ``first_author``, ``arxiv``, ``parents``, ``others``, ``later`` and ``cite``).
Paper = FamilyRecord

E, ED, D = BRANCHES


#: Every family the package builds, and the root; in order of publication.
LINEAGE: tuple[Paper, ...] = tuple(records().values())


def _by_key() -> dict[str, Paper]:
    return {paper.key: paper for paper in LINEAGE}


def lineage(branch: str | None = None) -> list[Paper]:
    """The papers :func:`plot_lineage` draws: one branch's, the root, and the parents they point to; or all.

    Args:
        branch: ``None`` for every family, or one of :data:`~literate_transformer.core.records.BRANCHES`.

    Returns:
        The papers in order of publication: the branch's families, the root, and each parent a family of the
        branch builds on in another branch (drawn, with its arrow, as a visitor).

    Raises:
        TypeError: if ``branch`` is not a string or ``None``.
        ValueError: if ``branch`` is not one of :data:`~literate_transformer.core.records.BRANCHES`.
    """
    if branch is not None and not isinstance(branch, str):
        raise TypeError(f"branch must be None or a string, got {branch!r}")
    if branch is not None and branch not in BRANCHES:
        raise ValueError(f"branch must be None or one of {BRANCHES}, got {branch!r}")
    if branch is None:
        return list(LINEAGE)
    members = {paper.key for paper in LINEAGE if paper.branch == branch} | {ROOT}
    visitors = {parent for paper in LINEAGE if paper.key in members for parent in paper.parents}
    return [paper for paper in LINEAGE if paper.key in members | visitors]


# Colours of a branch's boxes: (face, edge).
_COLOURS = {E: ("#dbe8f6", "#2f6aa8"), ED: ("#dcefd9", "#3a8a3a"), D: ("#fde4cf", "#c8651b")}
_ROOT_COLOURS = ("#e6e6e6", "#555555")
_BRANCH_TITLES = {E: "encoders", ED: "encoder-decoders", D: "decoders"}
# Geometry, in data units: a column is one box wide; a row is one box high.
_BOX_W, _BOX_H, _COLUMN_GAP, _EMPTY_YEAR = 0.94, 0.68, 0.45, 0.4
# The step between two columns of one branch: room for an arrow between two boxes side by side.
_SUBCOLUMN = 1.25
_INCH_X, _INCH_Y = 1.45, 0.6  # inches per data unit
# The bends an arrow may take (matplotlib's ``arc3`` radius), the straight line first.
_BENDS = (0.0, 0.15, -0.15, 0.3, -0.3, 0.5, -0.5, 0.75, -0.75, 1.0, -1.0, 1.3, -1.3, 1.7, -1.7, 2.2, -2.2)


def _bend(
    start: tuple[float, float],
    end: tuple[float, float],
    others: Sequence[tuple[float, float]],
    limits: tuple[float, float, float, float],
) -> float:
    """The least bend (``arc3`` radius) whose curve from ``start`` to ``end`` crosses the fewest other boxes.

    The curve is the quadratic Bezier matplotlib's ``arc3`` draws, computed in inches (the axes are placed so
    that a data unit is ``_INCH_X`` by ``_INCH_Y`` inches) with the vertical axis pointing up (the axes are
    inverted: time flows down), sampled between its two ends; leaving the axes (``limits``: x from, x to,
    y from, y to) is never chosen while a curve inside them exists.
    """
    (x0, y0), (x1, y1) = (start[0] * _INCH_X, -start[1] * _INCH_Y), (end[0] * _INCH_X, -end[1] * _INCH_Y)
    half_w, half_h = (_BOX_W / 2 + 0.04) * _INCH_X, (_BOX_H / 2 + 0.04) * _INCH_Y
    centres = [(x * _INCH_X, -y * _INCH_Y) for x, y in others]
    x_from, x_to, y_from, y_to = limits[0] * _INCH_X, limits[1] * _INCH_X, limits[2] * _INCH_Y, limits[3] * _INCH_Y

    def crossings(rad: float) -> int:
        cx, cy = (x0 + x1) / 2 + rad * (y1 - y0), (y0 + y1) / 2 - rad * (x1 - x0)
        hit, outside = set(), False
        for step in range(1, 40):
            t = step / 40
            px = (1 - t) ** 2 * x0 + 2 * t * (1 - t) * cx + t**2 * x1
            py = (1 - t) ** 2 * y0 + 2 * t * (1 - t) * cy + t**2 * y1
            hit |= {i for i, (bx, by) in enumerate(centres) if abs(px - bx) < half_w and abs(py - by) < half_h}
            outside = outside or not (x_from <= px <= x_to and -y_to <= py <= -y_from)
        return len(hit) + 100 * outside

    return min(_BENDS, key=lambda rad: (crossings(rad), abs(rad)))


def _lane(
    start: tuple[float, float], end: tuple[float, float], others: Sequence[tuple[float, float]], taken: dict
) -> float | None:
    """For an arrow down one column over other boxes of it, the x of a free lane beside the column; else ``None``.

    Such an arrow is drawn as a bracket: out of its parent's side, down the lane, into its child's side, so
    that it passes over no box and leaves none it does not start from.  The lane runs close to the column, in
    the gap beside it, on the side whose nearest box within the arrow's span of rows is farther (so that the
    bracket shares its ends with no arrow between two neighbours, and a bracket of the next column keeps to
    that column's side of the gap); ``taken`` counts the brackets already beside each column, so that the next
    one runs a little further out, beside them, not over them.
    """
    (x0, y0), (x1, y1) = start, end
    top, bottom = min(y0, y1), max(y0, y1)
    if x0 != x1 or not any(x == x0 and top < y < bottom for x, y in others):
        return None
    beside = [x - x0 for x, y in others if x != x0 and top - 0.5 <= y <= bottom + 0.5]
    room = {side: min((abs(d) for d in beside if d * side > 0), default=math.inf) for side in (-1, 1)}
    for side in sorted((-1, 1), key=lambda side: -room[side]):
        count = taken.get((x0, side), 0)
        lane = x0 + side * (_BOX_W / 2 + 0.12 + 0.08 * count)
        if not any(abs(x - lane) < _BOX_W / 2 + 0.05 and top - 0.5 <= y <= bottom + 0.5 for x, y in others):
            taken[(x0, side)] = count + 1
            return lane
    return None


def _layout(papers: Sequence[Paper]) -> tuple[dict[str, tuple[float, float]], dict[str, float], dict[int, tuple]]:
    """Box centres ``{key: (x, y)}`` (y grows downwards), the centre of each branch's columns, and each year's rows.

    A year is a band of rows; within it each branch stacks its papers of that year by month, ``per_row`` side
    by side (two in a branch where a year holds four or more of its papers, one elsewhere).
    """
    branches = [branch for branch in BRANCHES if any(paper.branch == branch for paper in papers)]
    years = range(min(paper.year for paper in papers), max(paper.year for paper in papers) + 1)
    cells: dict[tuple[str, int], list[Paper]] = {}
    for paper in sorted(papers, key=lambda paper: (paper.year, paper.month)):
        cells.setdefault((paper.branch, paper.year), []).append(paper)
    per_row = {b: 2 if max((len(cells.get((b, y), [])) for y in years), default=0) >= 4 else 1 for b in branches}
    # Columns: each branch's first column's left edge.
    left, x = {}, 0.0
    for branch in branches:
        left[branch] = x
        x += (per_row[branch] - 1) * _SUBCOLUMN + 1 + _COLUMN_GAP
    centres = {branch: left[branch] + (per_row[branch] - 1) * _SUBCOLUMN / 2 for branch in branches}
    positions: dict[str, tuple[float, float]] = {}
    bands: dict[int, tuple] = {}
    y = 0.0
    for year in years:
        rows = max((math.ceil(len(cells.get((b, year), [])) / per_row[b]) for b in branches), default=0)
        for branch in branches:
            for index, paper in enumerate(cells.get((branch, year), [])):
                row, column = divmod(index, per_row[branch])
                positions[paper.key] = (left[branch] + column * _SUBCOLUMN, y + row)
        height = rows if rows else _EMPTY_YEAR
        bands[year] = (y - 0.5, y - 0.5 + height)
        y += height
    return positions, centres, bands


def plot_lineage(branch: str | None = None) -> Figure:
    """The families by year and paper, an arrow from each model to the ones that build on it.

    Time flows down, one band of rows a year; each branch is a column (encoders, encoder-decoders with the 2017
    Transformer at the top, decoders).  A box names the model and its paper (first author and year); an arrow
    goes from the model a paper says it builds on, skipping the releases the package does not build.  With a
    ``branch``, only that branch's families are drawn, with the root and, in white with a dashed edge, the
    models of another branch that they build on.

    Args:
        branch: ``None`` for every family, or one of :data:`~literate_transformer.core.records.BRANCHES`.

    Returns:
        A matplotlib ``Figure`` (not registered with ``pyplot``): its axes hold one box (a ``FancyBboxPatch``
        with the paper's ``key`` as its ``gid``) per paper drawn and one ``FancyArrowPatch`` per arrow (its
        ``gid`` ``"parent->child"``).

    Raises:
        TypeError: if ``branch`` is not a string or ``None``.
        ValueError: if ``branch`` is not one of :data:`~literate_transformer.core.records.BRANCHES`.
    """
    papers = lineage(branch)
    keys = {paper.key for paper in papers}
    positions, centres, bands = _layout(papers)
    width = max(x for x, _ in positions.values()) + 1.0
    height = max(end for _, end in bands.values()) + 0.5
    # The axes placed by hand, so that a data unit is exactly _INCH_X by _INCH_Y inches (the bends rely on it).
    limits = (-1.3, width + 0.3, -0.5, height - 0.5)
    left, right, top, bottom = 0.95, 0.1, 0.95, 0.1
    axes_w, axes_h = (limits[1] - limits[0]) * _INCH_X, (limits[3] - limits[2]) * _INCH_Y
    size = (left + axes_w + right, top + axes_h + bottom)
    figure = Figure(figsize=size)
    ax = figure.add_axes((left / size[0], bottom / size[1], axes_w / size[0], axes_h / size[1]))
    ax.set_xlim(limits[0], limits[1])
    ax.set_ylim(limits[3], limits[2])
    boxes = {}
    for paper in papers:
        x, y = positions[paper.key]
        visitor = branch is not None and paper.branch != branch and paper.key != ROOT
        face, edge = _ROOT_COLOURS if paper.key == ROOT else _COLOURS[paper.branch]
        box = FancyBboxPatch(
            (x - _BOX_W / 2, y - _BOX_H / 2),
            _BOX_W,
            _BOX_H,
            boxstyle="round,pad=0,rounding_size=0.08",
            facecolor="white" if visitor else face,
            edgecolor=edge,
            linestyle="--" if visitor else "-",
            linewidth=1.0,
            zorder=3,
            gid=paper.key,
        )
        ax.add_patch(box)
        boxes[paper.key] = box
        ax.text(x, y - 0.14, paper.name, ha="center", va="center", fontsize=8.5, weight="bold", zorder=4)
        ax.text(x, y + 0.17, paper.cite, ha="center", va="center", fontsize=7, zorder=4)
    # Arrows: parent to child, each bent around the boxes in its way (over a box, under its text, where none is
    # free); one that runs down a column over other boxes of it, as a bracket in the gap beside the column.
    lanes: dict[tuple[float, int], int] = {}
    for paper in papers:
        if branch is not None and paper.branch != branch and paper.key != ROOT:
            continue  # a visitor is drawn for its arrow to this branch, not for its own ancestry
        for parent in paper.parents:
            if parent not in keys:
                continue
            (x0, y0), (x1, y1) = positions[parent], positions[paper.key]
            others = [positions[key] for key in keys if key not in (parent, paper.key)]
            lane = _lane((x0, y0), (x1, y1), others, lanes)
            if lane is None:
                connection = f"arc3,rad={_bend((x0, y0), (x1, y1), others, limits)}"
            else:
                # A bracket leaves its parent below the middle of its side and enters its child above it, so that
                # one bracket into a box and another out of it never meet.  matplotlib's "bar" steps aside by
                # `fraction` of the distance between its ends, to the left of the way down (positive) or right.
                y0, y1 = y0 + 0.15, y1 - 0.15
                aside = (x0 - lane) * _INCH_X / ((y1 - y0) * _INCH_Y)
                connection = f"bar,fraction={aside}"
            arrow = FancyArrowPatch(
                (x0, y0),
                (x1, y1),
                patchA=boxes[parent],
                patchB=boxes[paper.key],
                arrowstyle="-|>",
                mutation_scale=9,
                connectionstyle=connection,
                color="#555555",
                linewidth=0.8,
                shrinkA=1,
                shrinkB=1,
                zorder=3.5,
                gid=f"{parent}->{paper.key}",
            )
            ax.add_patch(arrow)
    # The years: a label and a light band each; the branches: a label above each column.
    for index, (top, bottom) in enumerate(bands.values()):
        if index % 2 == 0:
            ax.axhspan(top, bottom, color="#f3f3f3", zorder=0, linewidth=0)
    ax.set_yticks([(top + bottom) / 2 for top, bottom in bands.values()], [str(year) for year in bands])
    ax.set_xticks(list(centres.values()), [_BRANCH_TITLES[b] for b in centres])
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.tick_params(length=0)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.set_ylabel("year of the paper (its first public version)")
    ax.set_xlabel("branch")
    which = "every family the package builds" if branch is None else f"the {_BRANCH_TITLES[branch]}"
    ax.set_title(f"Where the models came from: {which}, by paper and year", fontsize=11)
    handles: list = [Line2D([], [], color="#555555", linewidth=0.8, marker=">", markersize=4, label="builds on")]
    if any(branch is not None and paper.branch != branch and paper.key != ROOT for paper in papers):
        handles.append(Patch(facecolor="white", edgecolor="#555555", linestyle="--", label="from another branch"))
    ax.legend(handles=handles, loc="lower left", fontsize=7.5, frameon=False)
    return figure
