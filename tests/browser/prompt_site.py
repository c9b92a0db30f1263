"""A stand-alone "Try your own prompt" page, laid out as the built site lays it out, without a Sphinx build.

:func:`assemble` writes into a folder what the site's build writes for the
page: ``try_prompt.html`` (the page's own HTML block, from
``docs/try_prompt.md``, in a bare document that loads the same stylesheets and
scripts, deferred, in the same order), ``_static/try/`` (the page's scripts, and its model's worker),
``_static/vendor/`` (onnxruntime-web and xzwasm) and the compressed export in
``_static/try/prompt/``, made by the same functions the site's extension calls
(``export_decoder_for_browser``, then ``gzip_once``).  The browser tests use
it when ``LT_PROMPT_STANDALONE`` is set, to check the page's scripts before a
site is built; the site's build is what they check otherwise.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "docs" / "_static"
PAGE_SOURCE = ROOT / "docs" / "try_prompt.md"
SCRIPTS = ("try/bpe.js", "try/sampling.js", "try/prompt.js")
#: The model's worker and what it imports beside it (served, never put on the page as scripts).
WORKER = ("try/prompt-worker.js", "try/blocks.js")
STYLES = ("try/try.css", "try/prompt.css")


def page_block() -> str:
    """The page's raw HTML block, as ``docs/try_prompt.md`` has it."""
    match = re.search(r"```\{raw\} html\n(.*?)\n```", PAGE_SOURCE.read_text(encoding="utf-8"), re.S)
    if match is None:
        raise ValueError(f"{PAGE_SOURCE} has no raw html block")
    return match.group(1)


def assemble(folder: Path, cache: Path) -> Path:
    """Write the stand-alone page into ``folder`` (the export cached in ``cache``); return ``folder``."""
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    from browser_export import copy_if_changed, gzip_once
    from lt_site.export_decoder import export_decoder_for_browser

    export = export_decoder_for_browser(cache)
    target = folder / "_static"
    for name in (*SCRIPTS, *WORKER, *STYLES):
        copy_if_changed(STATIC / name, target / name)
    for vendor in ("onnxruntime-web", "xzwasm"):
        shutil.copytree(STATIC / "vendor" / vendor, target / "vendor" / vendor, dirs_exist_ok=True)
    copy_if_changed(
        gzip_once(export.onnx_path, cache / "decoder.onnx.gz", export.digest), target / "try/prompt/decoder.onnx.gz"
    )
    copy_if_changed(
        gzip_once(export.blocks_path, cache / "decoder.blocks.gz", export.digest),
        target / "try/prompt/decoder.blocks.gz",
    )
    copy_if_changed(
        gzip_once(export.metadata_path, cache / "decoder.json.gz", export.digest), target / "try/prompt/decoder.json.gz"
    )
    head = "".join(f'<link rel="stylesheet" href="_static/{name}">\n' for name in STYLES)
    head += "".join(f'<script defer src="_static/{name}"></script>\n' for name in SCRIPTS)
    (folder / "try_prompt.html").write_text(
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>Try your own prompt</title>\n'
        f'<link rel="icon" href="data:,">\n{head}</head>\n<body><main>\n{page_block()}\n</main></body></html>\n',
        encoding="utf-8",
    )
    (folder / "index.html").write_text('<!doctype html><a href="try_prompt.html">Try your own prompt</a>\n')
    return folder
