"""The attention views draw in a real browser, offline, from the site's own files.

These tests open the *built* site (``nox -s docs`` first; ``LT_SITE_HTML``
points at another output folder) in headless Chromium, driven by Playwright
for Python with the system's browser (``apt-get install -y chromium``; no
browser is ever downloaded).  The site is served on 127.0.0.1 by a thread
with :mod:`http.server`, and every request the browser makes is recorded;
requests to any other host are refused, as on a machine with no network.

For every page that holds a bertviz view:

* the page is at most 1.5 MB;
* each view drew an SVG whose visible token labels are exactly the tokens of
  its data (left column, then right column) and that has attention lines
  with a non-zero opacity; the model view is clicked open to show its tokens,
  and every entry of a head view's *Attention* menu (sentence A/B parts,
  encoder/decoder/cross) is selected and must show that part's tokens;
* the browser console shows no error and no script raised;
* no request left 127.0.0.1 and none failed;
* a screenshot of the page and of each view is saved into
  ``docs/_build/browser-screenshots/`` (``LT_SCREENSHOTS`` elsewhere).

For every page of the site, no script, stylesheet, font or image comes from
another host, both in the HTML and in what the browser actually requests
(the pages opened four at a time, their requests recorded without being
routed, so that the browser's cache works as a reader's does; the browser
resolves no host but 127.0.0.1, so nothing leaves even then).

Run with ``nox -s browser`` or ``pytest -m browser tests/browser``.  Without
Chromium, Playwright or a built site these tests fail, they do not skip.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("LT_SITE_HTML", ROOT / "docs" / "_build" / "html"))
MAX_PAGE_BYTES = 1_500_000
# How many pages are opened at a time when every page of the site is opened.
TABS = 4
# How long a view may take to draw after the page has loaded (a slow, shared CI machine).
DRAW_TIMEOUT_MS = 20_000

# bertviz gives each view a root <div id="bertviz-<32 hex digits>">.
_VIEW_DIV = re.compile(r"""<div id=["']?(bertviz-[0-9a-f]{32})""")
# ...and writes its data as one JSON object after one of these.
_PARAMS_MARKERS = ("const params = ", "window.bertviz_params = ")


def _site_pages() -> list[Path]:
    if not (SITE / "index.html").is_file():
        return []
    return sorted(
        path
        for path in SITE.rglob("*.html")
        if not path.relative_to(SITE).parts[0].startswith(("_sources", "_downloads", "_static", "_images"))
    )


def _view_pages() -> list[Path]:
    return [path for path in _site_pages() if _VIEW_DIV.search(path.read_text(encoding="utf-8"))]


def _views(html: str) -> list[dict]:
    """Each view's root id, kind and the token labels it must draw, from its data in the page."""
    decoder = json.JSONDecoder()
    params_by_root = {}
    for marker in _PARAMS_MARKERS:
        for match in re.finditer(re.escape(marker) + r"(?=\{)", html):
            params, _ = decoder.raw_decode(html, match.end())
            params_by_root[params["root_div_id"]] = params
    views = []
    for root in _VIEW_DIV.findall(html):
        params = params_by_root.get(root)
        assert params is not None, f"view {root} has no data in the page"
        if "bidirectional" in params:
            kind, data = "neuron", params["attention"][params["default_filter"]]
        else:
            kind = "model" if "total_heads" in params else "head"
            data = params["attention"][int(params["default_filter"])]
        # The head view's "Attention" menu (sentence A/B, encoder/decoder/cross): every part's tokens.
        parts = (
            [(str(i), part["left_text"] + part["right_text"]) for i, part in enumerate(params["attention"])]
            if kind == "head"
            else []
        )
        views.append({"root": root, "kind": kind, "tokens": data["left_text"] + data["right_text"], "parts": parts})
    return views


def _page_id(path: Path) -> str:
    return path.relative_to(SITE).with_suffix("").as_posix()


# What is drawn: the visible <text> labels and the attention lines with a non-zero opacity.
_DRAWN = """(root) => {
  const view = document.getElementById(root);
  const shown = (element) => {
    if (!element.getClientRects().length) return false;
    for (let e = element; e && e !== view; e = e.parentElement) {
      const style = getComputedStyle(e);
      if (style.display === "none" || style.visibility === "hidden" || parseFloat(style.opacity) === 0) return false;
    }
    return true;
  };
  const texts = Array.from(view.querySelectorAll("svg text")).filter(shown);
  const lines = Array.from(view.querySelectorAll("svg line"))
    .filter((line) => shown(line) && parseFloat(line.getAttribute("stroke-opacity")) > 0);
  return {
    svgs: view.querySelectorAll("svg").length,
    texts: texts.map((t) => t.textContent.trim()),
    tokens: texts.filter((t) => t.classList.contains("token")).map((t) => t.textContent.trim()),
    lines: lines.length,
  };
}"""


# ---------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------
_VIEW_PAGES = _view_pages()


@pytest.mark.parametrize(
    "page_path", _VIEW_PAGES or [None], ids=[_page_id(path) for path in _VIEW_PAGES] or ["no-view-pages"]
)
def test_views_draw_offline(
    page_path: Path | None, site_url: str, browser: object, recorder: object, screenshots: Path
) -> None:
    if page_path is None:
        pytest.fail(f"no page with a bertviz view under {SITE}: build the site (python3 -m nox -s docs) first")
    page_id = _page_id(page_path)
    size = page_path.stat().st_size
    assert size <= MAX_PAGE_BYTES, f"{page_id} is {size / 1e6:.2f} MB, more than {MAX_PAGE_BYTES / 1e6:.1f} MB"
    expected = _views(page_path.read_text(encoding="utf-8"))

    context = browser.new_context(viewport={"width": 1400, "height": 1000}, service_workers="block")
    page = context.new_page()
    recorder = recorder(page)
    problems = []
    try:
        page.goto(site_url + page_path.relative_to(SITE).as_posix(), wait_until="load")
        for index, view in enumerate(expected):
            root = view["root"]
            selector = f"#{root} svg"
            try:
                page.wait_for_selector(selector, state="attached", timeout=DRAW_TIMEOUT_MS)
            except Exception:  # Playwright's TimeoutError: the view never drew
                problems.append(f"view {index} ({view['kind']}, {root}) drew no SVG")
                continue
            if view["kind"] == "model":
                # The model view shows tokens only for the thumbnail that was clicked: click the first one.
                thumbnail = page.locator(f"#{root} .attn_background").first
                thumbnail.scroll_into_view_if_needed()
                box = thumbnail.bounding_box()
                page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
                page.wait_for_selector(f"#{root} svg text.token", timeout=DRAW_TIMEOUT_MS)
                # Park the mouse where it highlights nothing, so the screenshots show the views at rest.
                page.mouse.move(0, 0)
            drawn = page.evaluate(_DRAWN, root)
            labels = drawn["texts"] if view["kind"] == "head" else drawn["tokens"]
            if labels != view["tokens"]:
                problems.append(
                    f"view {index} ({view['kind']}) shows {len(labels)} token labels {labels}, "
                    f"expected {len(view['tokens'])}: {view['tokens']}"
                )
            if drawn["lines"] == 0:
                problems.append(f"view {index} ({view['kind']}) drew no attention line")
            page.locator(f"#{root}").screenshot(
                path=str(screenshots / f"{page_id.replace('/', '__')}-{index}-{view['kind']}.png")
            )
            if len(view["parts"]) > 1:
                # Each entry of the menu redraws the view with that part's tokens; then back to the first.
                for value, tokens in [*view["parts"][1:], view["parts"][0]]:
                    page.select_option(f"#{root} #filter", value)
                    texts = page.evaluate(_DRAWN, root)["texts"]
                    if texts != tokens:
                        problems.append(f"view {index} (head), menu entry {value}: shows {texts}, expected {tokens}")
        page.screenshot(path=str(screenshots / f"{page_id.replace('/', '__')}.png"), full_page=True)
    finally:
        context.close()

    problems += recorder.errors
    problems += [f"request left 127.0.0.1: {url}" for url in recorder.foreign]
    assert recorder.requests, f"the browser recorded no request for {page_id}"
    assert not problems, f"{page_id}:\n  " + "\n  ".join(problems)


# Addresses of other hosts in what a page loads: scripts, stylesheets, icons, images, frames, media.
_LOADED = re.compile(
    r"""<(?:script|img|iframe|source|audio|video|embed)\b[^>]*\bsrc=["'](?P<src>[^"']+)["']"""
    r"""|<link\b(?=[^>]*\brel=["'](?:stylesheet|preload|modulepreload|icon|shortcut icon|manifest)["'])[^>]*\bhref=["'](?P<href>[^"']+)["']""",
    re.IGNORECASE,
)
_CSS_URL = re.compile(r"""(?:@import\s+|url\()\s*["']?(?P<url>https?://[^"')\s]+)""", re.IGNORECASE)


def _is_other_host(url: str) -> bool:
    url = url.strip()
    if url.startswith("//"):
        return True
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and parts.hostname not in ("127.0.0.1", "localhost")


def test_no_page_references_another_host() -> None:
    pages = _site_pages()
    if not pages:
        pytest.fail(f"no built site at {SITE}: build it first (python3 -m nox -s docs), or set LT_SITE_HTML")
    found = []
    for path in pages:
        for match in _LOADED.finditer(path.read_text(encoding="utf-8")):
            url = match["src"] or match["href"]
            if _is_other_host(url):
                found.append(f"{_page_id(path)}: {url}")
    for path in sorted((SITE / "_static").rglob("*.css")):
        for match in _CSS_URL.finditer(path.read_text(encoding="utf-8", errors="replace")):
            found.append(f"{path.relative_to(SITE)}: {match['url']}")
    assert len(pages) > 1
    assert not found, "loads from another host:\n  " + "\n  ".join(found)


def test_no_page_requests_another_host(site_url: str, browser: object, recorder: object) -> None:
    pages = _site_pages()
    if not pages:
        pytest.fail(f"no built site at {SITE}: build it first (python3 -m nox -s docs), or set LT_SITE_HTML")
    # A few tabs at a time, with the HTTP cache on (requests recorded, not routed), as a reader's browser opens them.
    context = browser.new_context(service_workers="block")
    tabs = [context.new_page() for _ in range(TABS)]
    recorders = [recorder(tab, intercept=False) for tab in tabs]
    requests, foreign = 0, []
    try:
        for start in range(0, len(pages), TABS):
            batch = list(zip(tabs, recorders, pages[start : start + TABS], strict=False))  # the last may be short
            for tab, _, path in batch:
                tab.goto(site_url + path.relative_to(SITE).as_posix(), wait_until="commit")
            for tab, _, _ in batch:
                tab.wait_for_load_state("load")
            tabs[0].wait_for_timeout(200)  # what the pages ask for just after they load
            for _, recorded, path in batch:
                requests += len(recorded.requests)
                foreign += [f"{_page_id(path)}: {url}" for url in recorded.foreign]
                recorded.requests.clear()
                recorded.foreign.clear()
    finally:
        context.close()
    assert requests >= len(pages)
    assert not foreign, "requests to other hosts:\n  " + "\n  ".join(foreign)


def test_a_request_to_another_host_is_recorded_and_goes_nowhere(site_url: str, browser: object, recorder: object):
    """The control of the test above: a page's fetch of another host is seen by a recorder that does not route."""
    context = browser.new_context(service_workers="block")
    page = context.new_page()
    recorded = recorder(page, intercept=False)
    try:
        page.goto(site_url + "index.html", wait_until="load")
        outcome = page.evaluate(
            "fetch('https://cdn.jsdelivr.net/npm/d3@7/dist/d3.min.js').then(() => 'fetched', () => 'failed')"
        )
    finally:
        context.close()
    assert recorded.foreign == ["https://cdn.jsdelivr.net/npm/d3@7/dist/d3.min.js"]
    assert outcome == "failed"
