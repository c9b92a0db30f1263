"""Intersphinx inventories built from small, reviewed text files, so the site builds offline.

The documentation must build offline (``sphinx-build -W -n`` with no
network), yet its signatures mention :class:`torch.Tensor`,
:class:`pathlib.Path` and :class:`transformers.BertModel`.  Instead of
downloading each project's ``objects.inv``, ``<sources>/<name>.txt`` lists
the handful of names the pages link to, one per line::

    torch.nn.Linear  py:class  generated/torch.nn.Linear.html#$

``$`` stands for the name, as in Sphinx's own inventory format.  At
``config-inited`` each list is written as a version-2 inventory (the
zlib-compressed format Sphinx reads) into the build's doctree folder, only
when its bytes change, and entered in ``intersphinx_mapping``.  A name that
is missing from a list shows up as a nitpicky warning, which fails the
build: add it to the list.

Settings (``conf.py``)
----------------------
``offline_inventories``
    ``{name: (url, project, version)}``: one entry per project, read from
    ``<offline_inventory_sources>/<name>.txt``.
``offline_inventory_sources``
    The folder of the lists, relative to ``conf.py`` (default ``_intersphinx``).
``offline_inventory_online``
    ``True`` to try each project's own inventory first and fall back to the
    local one (default ``False``: no network at all).
"""

from __future__ import annotations

import zlib
from pathlib import Path

__all__ = ["inventory_bytes", "write_inventory", "setup"]


def inventory_bytes(source: Path, project: str, version: str = "") -> bytes:
    """The ``objects.inv`` bytes for the text list ``source``."""
    entries = []
    for raw in Path(source).read_text(encoding="utf-8").splitlines():
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
    return header.encode() + zlib.compress(("\n".join(entries) + "\n").encode())


def write_inventory(source: Path, target: Path, project: str, version: str = "") -> Path:
    """Convert the text list ``source`` into an ``objects.inv`` at ``target``, rewriting it only on change."""
    payload = inventory_bytes(source, project, version)
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Unchanged bytes are not rewritten, so an unchanged build does not look dirty.
    if not target.is_file() or target.read_bytes() != payload:
        target.write_bytes(payload)
    return target


def _write_inventories(app, config) -> None:
    """``config-inited``: write each listed inventory and add it to ``intersphinx_mapping``."""
    sources = Path(app.confdir, config.offline_inventory_sources)
    folder = Path(app.doctreedir) / "offline-inventories"
    mapping = dict(config.intersphinx_mapping or {})
    for name, (url, project, version) in config.offline_inventories.items():
        local = str(write_inventory(sources / f"{name}.txt", folder / f"{name}.inv", project, version))
        mapping[name] = (url, (None, local) if config.offline_inventory_online else (local,))
    config.intersphinx_mapping = mapping


def setup(app) -> dict[str, object]:
    app.add_config_value("offline_inventories", {}, "env", types=frozenset({dict}))
    app.add_config_value("offline_inventory_sources", "_intersphinx", "env", types=frozenset({str}))
    app.add_config_value("offline_inventory_online", False, "env", types=frozenset({bool}))
    # Before intersphinx reads the mapping (its own config-inited handler runs at priority 800).
    app.connect("config-inited", _write_inventories, priority=400)
    return {"version": "2", "parallel_read_safe": True, "parallel_write_safe": True}
