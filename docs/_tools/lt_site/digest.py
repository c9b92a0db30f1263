"""One digest of the package's source, for every cache of the site.

The executed chapters, the runtime values beside the annotated source, the
proof badges and the browser export are all computed from the package, and
all cached: each must be computed again when, and only when, the package's
code or its data change.  :func:`source_digest` is the one key they share.
It hashes every file under the given folders (the source and the data the
code reads, such as the families' records; not Python's bytecode caches) with
its path *relative to the folder*, so the same checkout gives the same
digest wherever it sits, and a renamed file changes it.

>>> import tempfile, pathlib
>>> with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
...     for folder in (one, two):
...         _ = (pathlib.Path(folder) / "m.py").write_text("x = 1\\n")
...     source_digest([one]) == source_digest([two])
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

__all__ = ["source_digest"]


def source_digest(folders: Iterable[str | Path], salt: str = "") -> str:
    """16 hex digits of SHA-256 over every file under ``folders`` (``__pycache__`` aside): relative path and content.

    Args:
        folders: The source folders (the package's, usually), or the folders of the data a page reads.
        salt: Anything else the cached result depends on (versions, settings).

    Returns:
        The digest; the same files (wherever the folders are) and salt give the same digest.

    Raises:
        FileNotFoundError: for a folder that does not exist.
    """
    digest = hashlib.sha256(salt.encode())
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"source folder {folder} does not exist")
        files = (path for path in folder.rglob("*") if path.is_file() and "__pycache__" not in path.parts)
        for path in sorted(files):
            digest.update(path.relative_to(folder).as_posix().encode())
            digest.update(b"\0")
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()[:16]
