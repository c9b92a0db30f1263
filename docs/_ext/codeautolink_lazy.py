"""Let sphinx-codeautolink resolve names in transformers and torch without importing all of them.

To resolve a name such as ``transformers.BertModel`` in a code block,
sphinx-codeautolink imports the module and then runs its top-level
``if TYPE_CHECKING:`` blocks, so that names bound only for type checkers
become visible.  transformers keeps its whole public API behind such a block
in ``transformers/__init__.py``: at run time a lazy module imports each model
on first use, but running the block imports every model family in the
library, about twenty seconds on a two-core machine.  torch's own block costs
a few seconds more.  Both happen in every build, one in which nothing changed
included, because the names are resolved again each time.

The names this site uses resolve through the modules' run-time attributes
without those blocks.  For each package named in the
``codeautolink_lazy_packages`` setting (``("transformers", "torch")`` by
default), the blocks are left alone; every other module is treated as
before.  If a version of sphinx-codeautolink no longer has the hook this
wraps, the extension says so in the log and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)


def is_lazy(module_name: str, packages: Iterable[str]) -> bool:
    """Whether ``module_name`` is one of ``packages`` or inside one of them.

    >>> is_lazy("transformers.models.bert", ["transformers"])
    True
    >>> is_lazy("transformers_extra", ["transformers"])
    False
    """
    return any(module_name == p or module_name.startswith(p + ".") for p in packages)


def _wrap_resolver(app: Sphinx) -> None:
    try:
        from sphinx_codeautolink.extension import resolve
    except ImportError:  # sphinx-codeautolink is not installed
        return
    original = getattr(resolve, "populate_type_checking", None)
    if original is None:
        logger.info("codeautolink_lazy: sphinx-codeautolink has no populate_type_checking; unchanged")
        return
    original = getattr(original, "__wrapped_by_lazy__", original)
    packages = tuple(app.config.codeautolink_lazy_packages)

    def populate_type_checking(mod):
        if is_lazy(getattr(mod, "__name__", ""), packages):
            return None
        return original(mod)

    populate_type_checking.__wrapped_by_lazy__ = original
    resolve.populate_type_checking = populate_type_checking


def setup(app: Sphinx) -> dict:
    app.add_config_value("codeautolink_lazy_packages", ("transformers", "torch"), "env", [tuple, list])
    app.connect("builder-inited", _wrap_resolver)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
