"""Build intersphinx inventories from small, reviewed text files.

The documentation must build offline (``sphinx-build -W -n`` with no network),
yet its signatures mention :class:`torch.Tensor`, :class:`pathlib.Path` and
:class:`transformers.BertModel`.  Instead of downloading each project's
``objects.inv``, ``docs/_intersphinx/<project>.txt`` lists the handful of
names these pages link to, one per line::

    torch.nn.Linear  py:class  generated/torch.nn.Linear.html#$

``$`` stands for the name, as in Sphinx's own inventory format.  This module
writes each list as a version-2 inventory (the zlib-compressed format Sphinx
reads) for ``intersphinx_mapping``.  A name that is missing here shows up as
a nitpicky warning, which fails the build: add it to the list.
"""

from __future__ import annotations

import zlib
from pathlib import Path


def write_inventory(source: Path, target: Path, project: str, version: str = "") -> Path:
    """Convert the text list ``source`` into an ``objects.inv`` at ``target``."""
    entries = []
    for raw in source.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, role, uri = line.split()
        # "name domain:role priority uri dispname": priority 1, display name "-" (= name).
        entries.append(f"{name} {role} 1 {uri} -")
    header = (
        "# Sphinx inventory version 2\n"
        f"# Project: {project}\n"
        f"# Version: {version}\n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = header.encode() + zlib.compress(("\n".join(entries) + "\n").encode())
    # Rewrite only on change, so an unchanged build does not look dirty to Sphinx.
    if not target.exists() or target.read_bytes() != payload:
        target.write_bytes(payload)
    return target
