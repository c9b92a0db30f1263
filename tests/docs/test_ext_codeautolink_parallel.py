"""sphinx-codeautolink's pages are linked in forked workers, each once, and their warnings reach the build."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")
package = pytest.importorskip(
    "sphinx_codeautolink.extension",
    reason="sphinx-codeautolink is not installed (the docs extras); the extension is not tested",
)
import build_profile  # noqa: E402
import codeautolink_parallel  # noqa: E402
from sphinx.events import EventListener  # noqa: E402
from sphinx_codeautolink.extension import block, print_exceptions  # noqa: E402


class _Extension:
    """What the extension reads of sphinx-codeautolink's instance."""

    do_nothing = False
    inventory: dict = {}
    custom_blocks: dict = {}
    search_css_classes: list = []
    disable_link_titles = False

    def __init__(self, transforms: dict, outdated: set) -> None:
        self.cache = SimpleNamespace(transforms=transforms)
        self.outdated_docs = outdated

    @print_exceptions()  # as sphinx-codeautolink's own handler is decorated
    def apply_links(self, app, exception) -> None:
        for doc in codeautolink_parallel.pages_to_link(self):
            package.link_html(doc, app.outdir)


def _app(extension: _Extension, outdir: Path, profiled: bool = False) -> SimpleNamespace:
    listeners = {"build-finished": [EventListener(id=0, handler=extension.apply_links, priority=500)]}
    connected = []
    app = SimpleNamespace(
        events=SimpleNamespace(listeners=listeners),
        outdir=str(outdir),
        builder=SimpleNamespace(name="html"),
        connect=lambda event, handler, priority=500: connected.append((event, handler)),
        connected=connected,
    )
    if profiled:  # as in the site's build: the profile wraps every handler to time it
        build_profile.wrap_listeners(app)
        assert listeners["build-finished"][0].handler != extension.apply_links
    return app


def test_only_resolved_pages_read_in_this_build_are_linked():
    extension = _Extension({"a": ["t"], "b": [], "c": ["t"]}, {"a", "b"})
    assert codeautolink_parallel.pages_to_link(extension) == ["a"]


@pytest.mark.parametrize("profiled", [False, True], ids=["bare handler", "handler timed by the profile"])
def test_pages_are_linked_in_workers_once_and_their_warnings_reach_the_build(tmp_path, monkeypatch, profiled):
    def fake_link_html(doc, outdir, *args, **kwargs):
        # Runs in a worker: a file per call, and a warning for one page.
        with open(Path(outdir) / f"{doc}.{__import__('os').getpid()}", "w"):
            pass
        if doc == "b":
            block.logger.warning("Could not match", type="codeautolink", subtype="match_block", location=doc)

    monkeypatch.setattr(block, "link_html", fake_link_html)
    monkeypatch.setattr(package, "link_html", fake_link_html)
    warned = []
    monkeypatch.setattr(block, "logger", SimpleNamespace(warning=lambda message, **options: warned.append(options)))
    extension = _Extension({name: ["t"] for name in "abcd"}, set("abcd"))
    app = _app(extension, tmp_path, profiled)

    codeautolink_parallel.link_in_parallel(app, None)
    made = sorted(path.name.split(".")[0] for path in tmp_path.iterdir())
    assert made == ["a", "b", "c", "d"]  # each page once, none in this process
    assert all(not path.name.endswith(f".{__import__('os').getpid()}") for path in tmp_path.iterdir())
    assert warned == [{"location": "b", "type": "codeautolink", "subtype": "match_block"}]
    # The extension's own handler runs next and links nothing again; the last handler puts link_html back.
    extension.apply_links(app, None)
    assert len(list(tmp_path.iterdir())) == 4
    ((event, restore),) = app.connected
    restore(app, None)
    assert event == "build-finished" and package.link_html is fake_link_html


def test_a_failed_build_or_a_missing_handler_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(package, "link_html", lambda *args, **kwargs: pytest.fail("linked"))
    extension = _Extension({"a": ["t"], "b": ["t"]}, {"a", "b"})
    codeautolink_parallel.link_in_parallel(_app(extension, tmp_path), RuntimeError("build failed"))
    app = _app(extension, tmp_path)
    app.events.listeners["build-finished"] = []
    codeautolink_parallel.link_in_parallel(app, None)
    assert not list(tmp_path.iterdir()) and not app.connected
