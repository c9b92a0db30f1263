"""The chapters' glue: what a hidden cell calls in one line to hand the page its figures and labels.

A chapter shows the lines that teach; what only feeds the page's text (the
figures of a "what if" panel, glued under the names the text asks for)
lives here, in cells a downloaded notebook leaves out.  What a chapter
shows open comes from the package (its drawings and tables are in
:mod:`literate_transformer.family_tree` and
:mod:`literate_transformer.visualize`).  The chapters' kernels find this
package on the ``PYTHONPATH`` that ``docs/conf.py`` sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["glue_key", "glue_figures", "layer_rows"]


def glue_key(prefix: str, name: str) -> str:
    """``<prefix>-<name>``, spaces as dashes: the name a page's ``{glue:figure}`` asks for.

    >>> glue_key("padding", "mask on")
    'padding-mask-on'
    """
    return f"{prefix}-{name.replace(' ', '-')}"


def glue_figures(prefix: str, figures: Mapping[str, Any]) -> None:
    """Glue each figure under :func:`glue_key` ``(prefix, name)``, not displayed where the cell runs.

    The cell needs ``%matplotlib inline`` first (it registers the PNG formatter a glued figure is stored with).

    Args:
        prefix: The panel's prefix, e.g. ``"padding"``.
        figures: ``{name: figure}``, as :func:`~literate_transformer.visualize.plot_what_if` returns.
    """
    from myst_nb import glue

    for name, figure in figures.items():
        glue(glue_key(prefix, name), figure, display=False)


def layer_rows(num_layers: int) -> list[str]:
    """The row labels of a stack's vectors: the embeddings, then the output of each layer, numbered from 0.

    >>> layer_rows(3)
    ['embeddings', 'layer 0', 'layer 1', 'layer 2']
    """
    return ["embeddings"] + [f"layer {index}" for index in range(num_layers)]
