"""Fail the build when a gallery example silently produced nothing.

sphinx-gallery's ``abort_on_example_error`` stops the build when an example
*raises*.  An example can also fail quietly: a script that no longer matches
``filename_pattern`` is rendered as plain code without being run, a script
whose figure-making code sits behind a condition that is false on the build
machine produces a page without a figure, and a stale ``auto_examples``
folder can hide a script that was never executed at all.

When an HTML build finishes, this extension checks that every
``gallery/plot_*.py`` has its page in the output and that the page shows at
least one figure produced by that script (``sphx_glr_<name>_NNN.png``).
Anything missing is reported by name as an error, and the build's exit
status is non-zero even without ``-W``.  A build told not to run the
examples (sphinx-gallery's ``plot_gallery`` off, e.g. ``-D plot_gallery=0``)
has nothing to check and says so.

One linker per gallery page
---------------------------
sphinx-gallery links the names in its examples' code itself (to the API
reference and, through intersphinx, to PyTorch's docs).  sphinx-codeautolink,
which links the chapters' code, would try to link the same blocks again
after the HTML is written, find the names already inside sphinx-gallery's
links, and warn "Could not match transformation" for each.  Its cache keeps
``.rst`` pages (the gallery's) between builds but not ``.md`` ones, so the
warnings came and went with the state of the cache.  The gallery's pages
are therefore taken out of sphinx-codeautolink's work list before it
resolves anything.
"""

from __future__ import annotations

import re
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)


def missing_gallery_outputs(examples_dir: Path, html_dir: Path, gallery_dir: str) -> list[str]:
    """Describe each ``plot_*.py`` in ``examples_dir`` whose page or figure is missing.

    Args:
        examples_dir: The folder holding the gallery scripts.
        html_dir: The HTML output folder of the build.
        gallery_dir: The gallery's folder inside the output (``auto_examples``).

    Returns:
        One line per problem; empty when every script rendered a figure.
    """
    problems = []
    for script in sorted(examples_dir.glob("plot_*.py")):
        page = html_dir / gallery_dir / f"{script.stem}.html"
        if not page.is_file():
            problems.append(f"{script.name}: no page {page.relative_to(html_dir)} was built")
            continue
        figure = re.compile(rf"sphx_glr_{re.escape(script.stem)}_\d{{3}}\.(png|svg|jpg)")
        if not figure.search(page.read_text(encoding="utf-8")):
            problems.append(f"{script.name}: its page shows no figure (did the script run and call plt.show()?)")
    return problems


def check_gallery(app: Sphinx, exception: Exception | None) -> None:
    """``build-finished`` handler: log each gallery script that left no figure and fail the build."""
    if exception is not None or app.builder.format != "html":
        return
    conf = app.config.sphinx_gallery_conf
    if not conf.get("plot_gallery", True):
        logger.info("gallery check: skipped, the examples were not executed (plot_gallery is off)")
        return
    examples_dirs = conf["examples_dirs"]
    gallery_dirs = conf["gallery_dirs"]
    if isinstance(examples_dirs, str):
        examples_dirs, gallery_dirs = [examples_dirs], [gallery_dirs]
    problems = []
    for examples_dir, gallery_dir in zip(examples_dirs, gallery_dirs, strict=True):
        source = Path(app.confdir, examples_dir)
        problems += missing_gallery_outputs(source, Path(app.outdir), gallery_dir)
    if not problems:
        logger.info("gallery check: every example rendered at least one figure")
        return
    for problem in problems:
        logger.error("gallery example without output: %s", problem)
    # Fail the build even without -W (an error is otherwise only counted as a warning).
    app.statuscode = 1


def leave_gallery_code_to_sphinx_gallery(app: Sphinx, env: object) -> None:
    """``env-updated`` handler: drop gallery pages from sphinx-codeautolink's work list."""
    transforms = getattr(app.env, "sphinx_codeautolink_transforms", None)
    if transforms is None:  # sphinx-codeautolink is not loaded
        return
    gallery_dirs = app.config.sphinx_gallery_conf["gallery_dirs"]
    if isinstance(gallery_dirs, str):
        gallery_dirs = [gallery_dirs]
    prefixes = tuple(f"{folder.rstrip('/')}/" for folder in gallery_dirs)
    for docname in [name for name in transforms if name.startswith(prefixes)]:
        del transforms[docname]


def setup(app: Sphinx) -> dict[str, object]:
    # Before sphinx-codeautolink's own env-updated handler (priority 500) resolves the names.
    app.connect("env-updated", leave_gallery_code_to_sphinx_gallery, priority=400)
    app.connect("build-finished", check_gallery)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
