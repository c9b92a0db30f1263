"""literate_transformer.visualize's views ask no CDN for anything: the package's d3, jQuery and loader are inlined.

These tests read the HTML the views return and what IPython's display
formatters make of bertviz's own outputs; the browser tests
(``tests/browser/test_notebook_views.py``) check that the views then draw.
"""

from __future__ import annotations

import hashlib
import re
from types import SimpleNamespace

import pytest
import torch

from literate_transformer import visualize

TOKENS = ["[CLS]", "time", "flies", "like", "an", "arrow", "[SEP]"]
# bertviz's own loads: its <script src=".../require.min.js"> and the CDN addresses in require.config.
CDN = re.compile(
    r"cdnjs|src=[\"']https?://|[\"']https?://[^\"']*/require(?:\.min)?\.js|(?:d3|jquery)\s*:\s*[\"']https?://"
)


def _attentions(layers=2, heads=3, tokens=7):
    torch.manual_seed(0)
    return tuple(torch.softmax(torch.randn(1, heads, tokens, tokens), dim=-1) for _ in range(layers))


def _bertviz_head_view_html() -> str:
    import bertviz

    return bertviz.head_view(list(_attentions()), TOKENS, html_action="return").data


def test_the_package_ships_the_d3_and_jquery_its_readme_names_with_their_licences():
    readme = (visualize.STATIC / "README.txt").read_text(encoding="utf-8")
    for name, licence in (("d3.min.js", "d3.LICENSE"), ("jquery.min.js", "jquery.LICENSE.txt")):
        digest = hashlib.sha256((visualize.STATIC / name).read_bytes()).hexdigest()
        assert f"sha256 {digest}" in readme, f"{name}'s SHA-256 is not the one README.txt names"
        assert (visualize.STATIC / licence).stat().st_size > 500, licence


def test_a_head_view_loads_nothing_from_a_cdn_and_carries_the_libraries_once_before_its_script():
    html = visualize.head_view(_attentions(), TOKENS).data
    assert not CDN.search(html), CDN.search(html)
    assert html.count(visualize.OFFLINE_SCRIPT_MARK) == 1
    # The libraries and the loader come first; the view's own script, which asks for them, after.
    assert html.index(visualize.OFFLINE_SCRIPT_MARK) < html.index("requirejs(['jquery', 'd3']")
    assert (visualize.STATIC / "d3.min.js").read_text(encoding="utf-8") in html
    assert (visualize.STATIC / "jquery.min.js").read_text(encoding="utf-8") in html


def test_a_model_view_loads_nothing_from_a_cdn_either():
    html = visualize.model_view(_attentions(), TOKENS).data
    assert not CDN.search(html) and html.count(visualize.OFFLINE_SCRIPT_MARK) == 1


def test_offline_html_rewrites_bertvizs_own_view_and_leaves_other_html_alone():
    rewritten = visualize.offline_html(_bertviz_head_view_html())
    assert not CDN.search(rewritten) and rewritten.count(visualize.OFFLINE_SCRIPT_MARK) == 1
    other = '<p>a <script src="https://example.org/app.js"></script> require.config({baseUrl: "x"});</p>'
    assert visualize.offline_html(other) == other


def test_offline_html_refuses_what_is_not_a_string():
    with pytest.raises(TypeError, match="html must be a view's HTML"):
        visualize.offline_html(b"<div></div>")


def test_in_a_notebook_bertvizs_own_outputs_are_displayed_offline():
    from IPython.core.formatters import DisplayFormatter
    from IPython.display import HTML, Javascript

    shell = SimpleNamespace(display_formatter=DisplayFormatter())
    assert visualize.offline_views(shell) is True
    html = _bertviz_head_view_html()
    # What bertviz.head_view(...) displays in a notebook: the require.js tag, the view's <div>, its script.
    tag = re.search(r"<script src=[^>]*require[^>]*></script>", html)[0]
    script = html[html.index('<script type="text/javascript">') :].removeprefix('<script type="text/javascript">')
    shown_tag, _ = shell.display_formatter.format(HTML(tag))
    shown_script, _ = shell.display_formatter.format(Javascript(script.removesuffix("</script>\n")))
    assert shown_tag["text/html"].count(visualize.OFFLINE_SCRIPT_MARK) == 1
    assert not CDN.search(shown_tag["text/html"]) and not CDN.search(shown_script["application/javascript"])
    # Any other HTML is displayed as it is, another library's use of require.js too.
    other = '<script src="https://cdn.example/require.js"></script><script>require.config({paths: {d3: "x"}});</script>'
    for html in ("<b>bold</b>", other):
        shown, _ = shell.display_formatter.format(HTML(html))
        assert shown["text/html"] == html
    plotly = "require.config({paths: {'plotly': 'https://cdn.plot.ly/plotly.min'}}); require(['plotly'], f);"
    assert shell.display_formatter.format(Javascript(plotly))[0]["application/javascript"] == plotly


def test_outside_a_notebook_offline_views_does_nothing():
    assert visualize.offline_views() is False
