"""Shared fixtures of the browser tests: the built site on 127.0.0.1, a headless Chromium, a request recorder.

The site is the finished build (``nox -s docs`` first; ``LT_SITE_HTML``
points at another output folder), served by a thread with
:mod:`http.server` on 127.0.0.1 only.  The browser is the system's Chromium
(``apt-get install -y chromium``; ``LT_CHROMIUM`` points at another binary),
driven by Playwright for Python, which never downloads a browser of its own.
Without Chromium, Playwright or a built site the tests fail, they do not skip.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("LT_SITE_HTML", ROOT / "docs" / "_build" / "html"))
CHROMIUM = os.environ.get("LT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="session")
def site_dir() -> Path:
    """The built site's folder."""
    if not (SITE / "index.html").is_file():
        pytest.fail(f"no built site at {SITE}: build it first (python3 -m nox -s docs), or set LT_SITE_HTML")
    return SITE


@pytest.fixture(scope="session")
def screenshots(site_dir: Path) -> Path:
    """Where screenshots go (``LT_SCREENSHOTS``, default ``docs/_build/browser-screenshots``)."""
    folder = Path(os.environ.get("LT_SCREENSHOTS", site_dir.parent / "browser-screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


@pytest.fixture(scope="session")
def site_url(site_dir: Path) -> Iterator[str]:
    """The site, served on 127.0.0.1 for the whole test session."""
    handler = functools.partial(_QuietHandler, directory=str(site_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Headless Chromium, with the flags a machine without network needs."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(
            f"Chromium not found (looked for {CHROMIUM}): install it with `apt-get install -y chromium` "
            "(or point LT_CHROMIUM at a Chromium binary)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright for Python is not installed: pip install -c constraints.txt -e '.[browser]'")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                # Every host but this machine's is unknown to the browser: nothing leaves it, even from a page
                # whose requests are recorded without being routed (the recorder's intercept=False).
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            ],
        )
        try:
            yield chromium
        finally:
            chromium.close()


class Recorder:
    """Everything a page asks the network for, and everything it complains about.

    Requests to any host but the local server are recorded, then refused, as
    on a machine with no network.  With ``intercept=False`` they are recorded
    alone (the browser resolves no other host, so they fail on their own):
    routing every request through Playwright turns the browser's HTTP cache
    off, and a test that opens every page of the site would then fetch every
    script and stylesheet again for each.
    """

    def __init__(self, page: object, site_url: str, intercept: bool = True) -> None:
        self.local = urlsplit(site_url).netloc
        self.requests: list[str] = []
        self.foreign: list[str] = []
        self.errors: list[str] = []
        page.on("request", self._request)
        page.on("console", lambda message: message.type == "error" and self.errors.append(f"console: {message.text}"))
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        page.on("requestfailed", self._failed)
        page.on("response", lambda response: response.status >= 400 and self._bad(response))
        if intercept:
            page.route("**/*", self._route)

    def _is_local(self, url: str) -> bool:
        parts = urlsplit(url)
        return parts.scheme in ("data", "blob", "about") or parts.netloc == self.local

    def _route(self, route: object) -> None:
        if self._is_local(route.request.url):
            route.continue_()
        else:
            route.abort()

    def _request(self, request: object) -> None:
        self.requests.append(request.url)
        if not self._is_local(request.url):
            self.foreign.append(request.url)

    def _failed(self, request: object) -> None:
        if self._is_local(request.url):
            self.errors.append(f"request failed: {request.url} ({request.failure})")

    def _bad(self, response: object) -> None:
        self.errors.append(f"HTTP {response.status}: {response.url}")

    def check(self) -> None:
        """Fail with every error and every request that tried to leave 127.0.0.1."""
        problems = self.errors + [f"request left 127.0.0.1: {url}" for url in self.foreign]
        assert not problems, "\n  ".join(["the page had problems:", *problems])


@pytest.fixture(scope="session")
def recorder(site_url: str) -> Callable[[object], Recorder]:
    """``recorder(page)`` starts recording a Playwright page's requests and errors (``intercept=False``: see Recorder)."""
    return lambda page, intercept=True: Recorder(page, site_url, intercept)
