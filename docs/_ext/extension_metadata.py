"""What each of this site's Sphinx extensions tells Sphinx about itself, in one place.

Sphinx keeps a pickled environment between builds and throws it away when an
extension's ``env_version`` changes.  Ours derive it from their own source
text, so that editing an extension re-reads every page it may have changed,
and leaving it alone keeps a rebuild incremental.  All of them can read and
write in parallel (``sphinx-build -j``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def environment_version(*files: str | Path) -> int:
    """A number that changes when (and only when) the text of one of ``files`` changes."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(Path(path).read_bytes())
    return int(digest.hexdigest()[:8], 16)


def extension_metadata(*files: str | Path) -> dict[str, object]:
    """``setup()``'s return value for an extension made of ``files``."""
    return {
        "version": "1",
        "env_version": environment_version(*files),
        "parallel_read_safe": True,
        "parallel_write_safe": True,
    }
