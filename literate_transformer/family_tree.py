"""The family tree, drawn from the family modules themselves; a family's lines beside its parent's; the branches.

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

Chapter 12 draws the tree of the three branches (:func:`branch_tree`) and
reads what each model of a branch chooses off its modules
(:func:`branch_table`, a column per model by :func:`describe_model`).

>>> tree = family_tree(["models.bert", "models.openai_gpt", "models.gpt2"])
>>> [(node.name, node.parent) for node in tree.nodes]
[('BERT', None), ('GPT', None), ('GPT-2', 'models.openai_gpt')]
"""

from __future__ import annotations

import ast
import difflib
import html
import importlib
import inspect
import os
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from torch import nn

PACKAGE = "literate_transformer"

__all__ = [
    "Family",
    "FamilyTree",
    "family_tree",
    "Beside",
    "beside",
    "HTML",
    "TREE_NODES",
    "TREE_EDGES",
    "branch_tree",
    "describe_model",
    "branch_table",
]


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


#: The module of the conversion every family's models inherit, which makes no family a parent.
REGISTRY = f"{PACKAGE}.models.registry"


def _analyse(relative: str) -> Family:
    module = importlib.import_module(f"{PACKAGE}.{relative}")
    classes = _classes(module)
    parents: dict[str, int] = {}
    for cls in classes:
        # Each class votes for the nearest family it descends from (a grandparent family is its parent's parent);
        # the registry, where every family's conversion comes from, is no family.
        for base in cls.__mro__[1:]:
            owner = base.__module__
            if (
                owner.startswith(f"{PACKAGE}.models.")
                and owner not in (module.__name__, REGISTRY)
                and owner.count(".") == 2
            ):
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


#: Unchanged lines shown around each change; longer runs of unchanged lines are folded into one line.
CONTEXT = 2

#: The most lines a column shows; the rest is one click away, on the annotated source.
MAX_LINES = 25

#: Where a column's title links: the module's annotated source page, from a chapter's page.
SOURCE_PAGE = "../source/{package}.{module}.html"


@dataclass
class Beside:
    """Two pieces of source side by side, the lines that differ marked; shown as HTML in a notebook or a page.

    Only the changes are shown, each with ``CONTEXT`` unchanged lines around it; a longer run of
    unchanged lines is folded into one line that counts them, and each column's title links to its
    module's annotated source, where the whole class is.  Docstrings are left out of the comparison: the
    code is what changes.

    Attributes:
        parent: The parent's lines.
        child: The family's lines.
        titles: The two columns' titles.
        changed: The indices of the family's lines that are not the parent's (added or changed).
        qualnames: The two objects' qualified names within their modules (the rest of a title is the module).
    """

    parent: list[str]
    child: list[str]
    titles: tuple[str, str]
    changed: set[int]
    qualnames: tuple[str, str] = ("", "")

    @property
    def parent_changed(self) -> set[int]:
        """The indices of the parent's lines that the family does not keep."""
        matcher = difflib.SequenceMatcher(a=self.parent, b=self.child, autojunk=False)
        kept = {index for block in matcher.get_matching_blocks() for index in range(block.a, block.a + block.size)}
        return set(range(len(self.parent))) - kept

    def _column(self, lines: list[str], title: str, qualname: str, marked: set[int]) -> str:
        rows = []
        for index in shown_lines(len(lines), marked):
            if isinstance(index, int):
                kind = "lt-changed" if index in marked else "lt-same"
                rows.append(f'<span class="{kind}">{html.escape(lines[index]) or " "}</span>\n')
            else:
                rows.append(f'<span class="lt-folded">{html.escape(index)}</span>\n')
        module = title[: -len(qualname) - 1] if title.endswith("." + qualname) else title
        href = SOURCE_PAGE.format(package=PACKAGE, module=module)
        heading = f'<a href="{html.escape(href)}">{html.escape(title)}</a>'
        return f'<div class="lt-beside-column"><p class="lt-beside-title">{heading}</p><pre>{"".join(rows)}</pre></div>'

    def _repr_html_(self) -> str:
        return (
            '<div class="lt-beside" style="display:flex;gap:1em;overflow-x:auto">'
            + self._column(self.parent, self.titles[0], self.qualnames[0], self.parent_changed)
            + self._column(self.child, self.titles[1], self.qualnames[1], self.changed)
            + "</div>"
        )


def shown_lines(count: int, marked: set[int], context: int = CONTEXT, limit: int = MAX_LINES) -> list[int | str]:
    """The lines a column shows: every marked line with ``context`` lines around it, the first line (the
    ``def`` or ``class``), and a note in place of each longer unchanged run; at most ``limit`` rows, the
    last of them a note of how many lines are left out.

    >>> shown_lines(12, {6})
    [0, '  ⋯ 3 lines the same', 4, 5, 6, 7, 8, '  ⋯ 3 lines the same']
    >>> shown_lines(40, set(range(40)), limit=3)
    [0, 1, '  ⋯ 38 more lines, on the annotated source (the title links to it)']
    """
    keep = {0} | {near for index in marked for near in range(index - context, index + context + 1) if 0 <= near < count}
    shown: list[int | str] = []
    index = 0
    while index < count and len(shown) < limit:
        if index in keep:
            shown.append(index)
            index += 1
            continue
        end = index
        while end < count and end not in keep:
            end += 1
        run = end - index
        # A run of one is shown: its note would take the same room.
        shown.extend([index] if run == 1 else [f"  ⋯ {run} lines the same"])
        index = end
    if index < count:
        # Past the limit: the rest is on the module's annotated source, which the title links to.
        shown = shown[: limit - 1]
        last = max(row for row in shown if isinstance(row, int))
        shown.append(f"  ⋯ {count - last - 1} more lines, on the annotated source (the title links to it)")
    return shown


def _without_docstrings(lines: list[str]) -> list[str]:
    """``lines`` (a class's or function's dedented source) less the docstrings of it and its methods."""
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return lines
    dropped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    dropped.update(range(first.lineno - 1, first.end_lineno))
    return [line for index, line in enumerate(lines) if index not in dropped]


def _source(obj: object) -> list[str]:
    lines = textwrap.dedent(inspect.getsource(obj)).rstrip("\n").split("\n")
    return _without_docstrings(lines)


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
    qualnames = (getattr(parent, "__qualname__", ""), getattr(child, "__qualname__", ""))
    return Beside(parent_lines, child_lines, (_qualified(parent), _qualified(child)), changed, qualnames)


@dataclass(frozen=True)
class HTML:
    """A piece of HTML that a notebook (and so the page) shows as HTML."""

    html: str

    def _repr_html_(self) -> str:
        return self.html


# ---------------------------------------------------------------------------
# Chapter 12: the family tree of the branches, and what each model chooses
# ---------------------------------------------------------------------------
#: Each box of the tree (the shared parts, the three branches, the models built on them) as label, detail, x, y, link.
TREE_NODES = {
    "parts": (
        "The shared parts",
        "attention · feed-forward · residual · embeddings · masks",
        505,
        34,
        "#meet-shared-parts",
    ),
    "encoder": ("Encoder-only", "bidirectional self-attention", 100, 128, "#meet-encoder-branch"),
    "decoder": ("Decoder-only", "causal self-attention", 330, 128, "14_decoder_branch.html"),
    "seq2seq": ("Encoder-decoder", "+ cross-attention", 745, 128, "#meet-encoder-decoder-branch"),
    "bert": ("BERT", "post-LN, segments", 100, 222, "#meet-bert"),
    "gpt2": ("GPT-2", "pre-LN, tied head", 330, 222, "14_decoder_branch.html#decoder-gpt-2"),
    "transformer": ("2017 transformer", "torch.nn.Transformer", 560, 222, "#meet-2017-transformer"),
    "bart": ("BART", "post-LN, shared table", 745, 222, "15_encoder_decoder_branch.html#seq2seq-bart"),
    "t5": ("T5", "relative bias, RMS norm", 925, 222, "15_encoder_decoder_branch.html#seq2seq-t5"),
}
TREE_EDGES = [
    ("parts", "encoder"),
    ("parts", "decoder"),
    ("parts", "seq2seq"),
    ("encoder", "bert"),
    ("decoder", "gpt2"),
    ("seq2seq", "transformer"),
    ("seq2seq", "bart"),
    ("seq2seq", "t5"),
]


def branch_tree(width: int = 1015, height: int = 262, box: tuple[int, int] = (170, 46)) -> HTML:
    """The family tree of chapter 12 as inline SVG; ``currentColor`` makes lines and text follow the page's colours.

    Each box links to the section that builds it.

    >>> tree = branch_tree()
    >>> tree.html.count("<a href=") == len(TREE_NODES) and "<title id=" in tree.html
    True
    """
    half_w, half_h = box[0] / 2, box[1] / 2
    title = "The family tree of the transformers built in this book"
    description = (
        "The shared parts branch into encoder-only (BERT), decoder-only (GPT-2) and encoder-decoder models "
        "(the 2017 transformer, BART, T5); each box links to its section."
    )
    lines = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'style="max-width:{width}px;color:inherit" role="img" aria-labelledby="tree-title tree-desc">',
        f'<title id="tree-title">{title}</title>',
        f'<desc id="tree-desc">{description}</desc>',
    ]
    for parent, child in TREE_EDGES:
        (_, _, x1, y1, _), (_, _, x2, y2, _) = TREE_NODES[parent], TREE_NODES[child]
        lines.append(
            f'<line x1="{x1}" y1="{y1 + half_h}" x2="{x2}" y2="{y2 - half_h}" '
            'stroke="currentColor" stroke-opacity="0.5"/>'
        )
    for label, detail, x, y, link in TREE_NODES.values():
        w = half_w if len(detail) < 30 else 2.3 * half_w  # the root's box is wider
        lines += [
            f'<a href="{link}" aria-label="{html.escape(label)}: {html.escape(detail)}">',
            f'<rect x="{x - w}" y="{y - half_h}" width="{2 * w}" height="{box[1]}" rx="8" '
            'fill="currentColor" fill-opacity="0.06" stroke="currentColor"/>',
            f'<text x="{x}" y="{y - 3}" text-anchor="middle" font-size="15" font-weight="bold" '
            f'fill="currentColor">{html.escape(label)}</text>',
            f'<text x="{x}" y="{y + 15}" text-anchor="middle" font-size="11" '
            f'fill="currentColor">{html.escape(detail)}</text>',
            "</a>",
        ]
    return HTML("\n".join([*lines, "</svg>"]))


#: How the table names an activation of transformers' registry (chapter 6 defines both forms of GELU).
ACTIVATIONS = {"gelu": "GELU, exact: x·Φ(x) (gelu)", "gelu_new": "GELU, tanh form (gelu_new)", "relu": "ReLU (relu)"}


def _stacks(model: nn.Module) -> list[nn.Module]:
    """A model's stacks: the book's encoder, GPT-2's transformer, BART's encoder and decoder."""
    if hasattr(model, "transformer"):
        return [model.transformer]
    return [model.encoder, model.decoder] if hasattr(model, "decoder") else [model]


def _layers(stack: nn.Module) -> nn.ModuleList:
    return stack.layers if hasattr(stack, "layers") else stack.h


def describe_model(name: str, model: nn.Module) -> dict[str, str]:
    """One column of chapter 12's table: what the model chooses of the package's parts, read off its modules.

    Args:
        name: The model's name (``"GPT-2 small"`` marks the decoder-only one).
        model: The package's model: the book's encoder, ``GPT2LMHeadModel`` or ``BartForConditionalGeneration``.

    Returns:
        ``{row: value}``, in the table's order.
    """
    stacks = _stacks(model)
    first = stacks[0]
    positions = getattr(first, "wpe", None) or getattr(first, "embed_positions", None)
    positions = positions if positions is not None else first.embeddings.position_embeddings
    tokens = getattr(first, "wte", None) or getattr(first, "embed_tokens", None)
    tokens = tokens if tokens is not None else first.embeddings.token_embeddings
    offset = getattr(positions, "offset", 0)
    lm_head = getattr(model, "lm_head", None)
    tied = lm_head is not None and lm_head.weight is tokens.weight
    decoder_only = hasattr(model, "transformer")
    kinds = [
        "causal" + (" + cross-attention" if index else "") if index or decoder_only else "bidirectional"
        for index, _ in enumerate(stacks)
    ]
    names = [path for path, _ in first.named_modules()]
    final_norm = any(path in ("ln_f", "final_layer_norm", "layer_norm") for path in names)
    embedding_norm = any(path in ("layernorm_embedding", "embeddings.layer_norm") for path in names)
    unbiased = sorted(
        module_name
        for module_name, module in model.named_modules()
        if isinstance(module, nn.Linear) and module.bias is None
    )
    activation = getattr(model.config, "hidden_act", None) or model.config.activation_function
    return {
        "stacks (layers)": " + ".join(f"{type(stack).__name__} ({len(_layers(stack))})" for stack in stacks),
        "layer norm": "pre-LN" if _layers(first)[0].norm_first else "post-LN",
        "final layer norm": "yes" if final_norm else "no",
        "self-attention": " / ".join(kinds),
        "positions": f"learned, {positions.num_embeddings} rows" + (f", offset {offset}" if offset else ""),
        "segment embeddings": "yes" if any("token_type" in path for path in names) else "no",
        "embedding layer norm": "yes" if embedding_norm else "no",
        "token embeddings scaled": "×√E" if getattr(tokens, "embed_scale", 1.0) != 1.0 else "no",
        "LM head tied to the tokens": "—" if lm_head is None else ("yes" if tied else "no"),
        "activation": ACTIVATIONS.get(activation, activation),
        "linear layers without bias": ", ".join(unbiased) or "none",
    }


def branch_table(models: Mapping[str, nn.Module]) -> HTML:
    """Chapter 12's table: a column per model (:func:`describe_model`), a row per choice.

    >>> from literate_transformer import TransformerConfig, TransformerEncoder
    >>> config = TransformerConfig(vocab_size=10, hidden_size=8, num_attention_heads=2, intermediate_size=16)
    >>> table = branch_table({"tiny": TransformerEncoder(config, norm_first=False)})
    >>> "<th>layer norm</th><td>post-LN</td>" in table.html
    True
    """
    rows = {name: describe_model(name, model) for name, model in models.items()}
    header = "".join(f"<th>{html.escape(name)}</th>" for name in rows)
    body = "".join(
        f"<tr><th>{html.escape(field)}</th>"
        + "".join(f"<td>{html.escape(row[field])}</td>" for row in rows.values())
        + "</tr>"
        for field in next(iter(rows.values()))
    )
    return HTML(f'<table class="table"><thead><tr><th></th>{header}</tr></thead><tbody>{body}</tbody></table>')
