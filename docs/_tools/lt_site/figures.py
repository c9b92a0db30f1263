"""The family tree of a branch, drawn from the family modules themselves; a family's lines beside its parent's.

Each model family of the package is one module of
:mod:`literate_transformer.models` that imports its parent's classes and
writes only what it changes.  :func:`family_tree` reads that off the
modules: a family's parent is the family whose classes its classes subclass,
and what it changes is the list of classes it defines (each named without
the family's prefix: ``RobertaEmbeddings`` changes the ``Embeddings``).  A
family whose classes subclass no other family's hangs from the parts it
assembles.  Nothing is typed: rename a class or change a parent, and the
tree changes with it.

What a family changes is best read as code: :func:`beside` shows a
method or class of the family next to its parent's, the lines that differ
marked, as the site's annotated source shows every module.

>>> tree = family_tree(["models.bert", "models.openai_gpt", "models.gpt2"])
>>> [(node.name, node.parent) for node in tree.nodes]
[('BERT', None), ('GPT', None), ('GPT-2', 'models.openai_gpt')]
"""

from __future__ import annotations

import difflib
import html
import importlib
import inspect
import os
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

PACKAGE = "literate_transformer"

__all__ = ["Family", "FamilyTree", "family_tree", "Beside", "beside", "attention_patterns"]


@dataclass
class Family:
    """One node: a family module, its display name, its parent family and what it writes of its own."""

    module: str
    name: str
    parent: str | None
    changes: list[str] = field(default_factory=list)


def _display_name(module) -> str:
    """The family's name as its module's docstring gives it: the words before the first colon or comma."""
    first_line = (module.__doc__ or module.__name__).strip().splitlines()[0]
    return re.split(r"[:,]", first_line)[0].strip()


def _classes(module) -> list[type]:
    return [
        value
        for value in vars(module).values()
        if inspect.isclass(value) and issubclass(value, nn.Module) and value.__module__ == module.__name__
    ]


#: Where a word of a class name starts: ``GPT2|Attention``, ``Roberta|Embeddings``, ``Big|Bird|Pegasus|Encoder``.
_WORD_START = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _family_prefix(names: Sequence[str]) -> str:
    """The family's class prefix: the words most of its class names start with (the longest such, on a tie).

    ``DistilBert`` of ``DistilBertEmbeddings`` and ``DistilBertModel`` (whose first word is ``Distil``); no
    prefix where only one class has it, as that class's whole name says what it changes.

    >>> _family_prefix(["GPT2Attention", "GPT2Block", "Conv1D"]), _family_prefix(["BigBirdPegasusEncoder", "BigBirdPegasusModel"])
    ('GPT2', 'BigBirdPegasus')
    >>> _family_prefix(["OpenAIGPTAttention", "OpenAIGPTMLP", "OpenAIGPTModel", "OpenAIGPTLMHeadModel"])
    'OpenAIGPT'
    >>> _family_prefix(["ElectraDiscriminatorPredictions"])
    ''
    """
    counts: dict[str, int] = {}
    for name in names:
        for cut in {match.start() for match in _WORD_START.finditer(name)}:
            counts[name[:cut]] = counts.get(name[:cut], 0) + 1
    best = max(counts, key=lambda prefix: (counts[prefix], len(prefix)), default="")
    if counts.get(best, 0) <= 1:
        return ""
    # Extended to the whole words all its names share (OpenAIGPT of OpenAIGPTMLP and OpenAIGPTModel, whose
    # letters run together after "Open"): the longest common start at which every name goes on with a capital.
    sharing = [name for name in names if name.startswith(best)]
    prefix = os.path.commonprefix(sharing)
    while len(prefix) > len(best) and not all(
        len(name) > len(prefix) and name[len(prefix)].isupper() for name in sharing
    ):
        prefix = prefix[:-1]
    return prefix


def _analyse(relative: str) -> Family:
    module = importlib.import_module(f"{PACKAGE}.{relative}")
    classes = _classes(module)
    parents: dict[str, int] = {}
    for cls in classes:
        # Each class votes for the nearest family it descends from (a grandparent family is its parent's parent).
        for base in cls.__mro__[1:]:
            owner = base.__module__
            if owner.startswith(f"{PACKAGE}.models.") and owner != module.__name__ and owner.count(".") == 2:
                parents[owner] = parents.get(owner, 0) + 1
                break
    parent = max(parents, key=parents.get).removeprefix(f"{PACKAGE}.") if parents else None
    prefix = _family_prefix([cls.__name__ for cls in classes])
    changes = [cls.__name__.removeprefix(prefix) or cls.__name__ for cls in classes]
    return Family(relative, _display_name(module), parent, changes)


@dataclass
class FamilyTree:
    """The families of a branch, as nodes with their parents; shown as an SVG in a notebook or a page."""

    nodes: list[Family]

    def _depth(self, family: Family) -> int:
        by_module = {node.module: node for node in self.nodes}
        depth = 0
        while family.parent in by_module:
            family, depth = by_module[family.parent], depth + 1
        return depth

    def svg(self, box_width: int = 190, line_height: int = 14, gap: int = 36) -> str:
        """The tree, top to bottom by generation; lines and text in ``currentColor`` (light and dark pages)."""
        rows: dict[int, list[Family]] = {}
        for node in self.nodes:
            rows.setdefault(self._depth(node), []).append(node)
        height_of = {node.module: (2 + len(node.changes)) * line_height + 8 for node in self.nodes}
        row_heights = {depth: max(height_of[node.module] for node in row) for depth, row in rows.items()}
        width = max(len(row) for row in rows.values()) * (box_width + gap) + gap
        position, y = {}, gap
        for depth in sorted(rows):
            for index, node in enumerate(rows[depth]):
                position[node.module] = (gap + index * (box_width + gap), y)
            y += row_heights[depth] + gap
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {y}" width="100%" '
            f'style="max-width:{width}px;color:inherit" role="img" aria-label="family tree: '
            + html.escape(", ".join(f"{node.name} from {node.parent or 'the parts'}" for node in self.nodes))
            + '">'
        ]
        for node in self.nodes:
            x, top = position[node.module]
            if node.parent in position:
                px, ptop = position[node.parent]
                parts.append(
                    f'<line x1="{px + box_width / 2}" y1="{ptop + height_of[node.parent]}" '
                    f'x2="{x + box_width / 2}" y2="{top}" stroke="currentColor" stroke-opacity="0.5"/>'
                )
            parts.append(
                f'<rect x="{x}" y="{top}" width="{box_width}" height="{height_of[node.module]}" rx="6" '
                'fill="currentColor" fill-opacity="0.06" stroke="currentColor"/>'
            )
            parts.append(
                f'<text x="{x + 8}" y="{top + line_height + 2}" font-size="13" font-weight="bold" '
                f'fill="currentColor">{html.escape(node.name)}</text>'
            )
            for index, change in enumerate(node.changes, start=1):
                parts.append(
                    f'<text x="{x + 8}" y="{top + (index + 1) * line_height + 2}" font-size="11" '
                    f'font-family="monospace" fill="currentColor">{html.escape(change)}</text>'
                )
        return "\n".join([*parts, "</svg>"])

    def _repr_html_(self) -> str:
        return self.svg()


def family_tree(modules: Sequence[str]) -> FamilyTree:
    """The tree of the given family modules (names relative to the package, ``"models.roberta"``).

    Args:
        modules: The families to draw, parents first where it matters for the order within a row.

    Returns:
        A :class:`FamilyTree`: its nodes, and an SVG drawing when displayed.
    """
    return FamilyTree([_analyse(module) for module in modules])


@dataclass
class Beside:
    """Two pieces of source side by side, the lines that differ marked; shown as HTML in a notebook or a page.

    Attributes:
        parent: The parent's lines.
        child: The family's lines.
        titles: The two columns' titles.
        changed: The indices of the family's lines that are not the parent's (added or changed).
    """

    parent: list[str]
    child: list[str]
    titles: tuple[str, str]
    changed: set[int]

    def _column(self, lines: list[str], title: str, marked: set[int]) -> str:
        rows = "".join(
            f'<span class="{"lt-changed" if index in marked else "lt-same"}">{html.escape(line) or " "}</span>\n'
            for index, line in enumerate(lines)
        )
        return (
            f'<div class="lt-beside-column"><p class="lt-beside-title">{html.escape(title)}</p><pre>{rows}</pre></div>'
        )

    def _repr_html_(self) -> str:
        parent_marked = {index for index in range(len(self.parent)) if self.parent[index] not in self.child}
        return (
            '<div class="lt-beside" style="display:flex;gap:1em;overflow-x:auto">'
            + self._column(self.parent, self.titles[0], parent_marked)
            + self._column(self.child, self.titles[1], self.changed)
            + "</div>"
        )


def _source(obj: object) -> list[str]:
    return textwrap.dedent(inspect.getsource(obj)).rstrip("\n").split("\n")


def _qualified(obj: object) -> str:
    module = getattr(obj, "__module__", "").removeprefix(f"{PACKAGE}.")
    return f"{module}.{getattr(obj, '__qualname__', '')}"


def beside(parent: object, child: object) -> Beside:
    """The source of ``child`` (a family's class or method) beside ``parent``'s, the changed lines marked.

    Args:
        parent: The parent family's class, function or method.
        child: The family's own.

    Returns:
        A :class:`Beside` (HTML in a notebook or a page; ``changed`` lists the family's changed lines).

    >>> from literate_transformer.models import bart, gpt2
    >>> shown = beside(bart.BartAttention.output, gpt2.GPT2Attention.output)
    >>> [shown.child[index].strip() for index in sorted(shown.changed)][-1]
    'return self.resid_dropout(self.c_proj(context))'
    """
    parent_lines, child_lines = _source(parent), _source(child)
    matcher = difflib.SequenceMatcher(a=parent_lines, b=child_lines, autojunk=False)
    same = {index for block in matcher.get_matching_blocks() for index in range(block.b, block.b + block.size)}
    changed = set(range(len(child_lines))) - same
    return Beside(parent_lines, child_lines, (_qualified(parent), _qualified(child)), changed)


def attention_patterns(patterns: dict[str, Tensor], title: str = "Who may attend to whom (darker: read more often)"):
    """Masks side by side, one panel each, queries down and keys across: the patterns the code builds, drawn.

    Args:
        patterns: Panel titles and ``(T, S)`` masks: boolean (``True`` = may attend), additive (0 = may
            attend), or counts (how many times a query reads a key).
        title: The figure's title.

    Returns:
        A matplotlib figure.
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(patterns), figsize=(3.2 * len(patterns), 3.6), layout="constrained", squeeze=False)
    for ax, (name, pattern) in zip(axes[0], patterns.items(), strict=True):
        if pattern.is_floating_point():
            pattern = pattern > torch.finfo(pattern.dtype).min / 2
        values = pattern.detach().cpu().long()
        ax.imshow(values, cmap="Blues", vmin=0, vmax=1.3 * max(int(values.max()), 1), interpolation="nearest")
        ax.set_title(f"{name}\n{tuple(values.shape)}", fontsize=9)
        ax.set_xlabel("key")
        ax.set_ylabel("query")
    fig.suptitle(title)
    return fig
