"""Keep Python's cycle collector off the objects that live as long as the build.

CPython frees most objects by counting references.  Its cycle collector is
for the rest, objects that refer to one another in a ring; every so often it
walks *every* object that might be in one.  The build's processes import
PyTorch, ``transformers``, Sphinx and the package: millions of objects that
stay until the process ends.  Every full pass walks them all again (about a
third of a second each in a process that has imported PyTorch) and finds
nothing to free there.  Measured from inside each process over one clean
build, those passes took 66 s of CPU: 27 s in Sphinx's own processes, 15 s in
the proofs' and the exports', 14 s in the pages' kernels, 10 s in the
gallery's workers.

:func:`gc.freeze` moves every object alive at that moment out of the
collector's reach.  A frozen object is still freed when its last reference
goes; only a ring of frozen objects that becomes garbage stays in memory until
the process exits.  So each process freezes at the points after which what it
holds lives on:

* the build's own process, once its extensions are loaded, after the work of
  ``builder-inited`` (the trace, the gallery's scheduling), and after the pages
  are read (what Sphinx knows about them lives until the end).  Sphinx forks
  its reading and writing processes from it, and they inherit the freeze;
* the proofs' and the exports' processes, once what they run is imported
  (:func:`freeze`, called by ``proof_badges`` and ``browser_export``);
* the zygote of the pages' kernels, once PyTorch and ``transformers`` are
  imported (``forked_kernels.py``), the way Python's documentation of
  :func:`gc.freeze` advises for a process that forks;
* each of the gallery's workers before each example (:func:`collect_then_freeze`,
  one of ``reset_modules`` in ``conf.py``), once the previous example's rings
  are collected.
"""

from __future__ import annotations

import gc
from typing import Any

from sphinx.application import Sphinx


def freeze(*_: Any) -> None:
    """Move every object alive now out of the cycle collector's reach (a Sphinx handler, or a plain call)."""
    gc.freeze()


def collect_then_freeze(gallery_conf: Any, fname: Any, when: str) -> None:
    """sphinx-gallery's ``reset_modules`` callable: collect what the last example left in rings, freeze the rest.

    The collection walks only what is not frozen yet, so after the first example it is short.
    """
    gc.collect()
    gc.freeze()


def setup(app: Sphinx) -> dict:
    # Once every extension is loaded (config-inited comes after every setup()), first thing at builder-inited,
    # before the pages are read (after builder-inited's handlers) and once they are (before they are written).
    app.connect("config-inited", freeze, priority=900)
    app.connect("builder-inited", freeze, priority=1)
    app.connect("env-before-read-docs", freeze, priority=900)
    app.connect("env-updated", freeze, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
