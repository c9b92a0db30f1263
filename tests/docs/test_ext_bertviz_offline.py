"""bertviz offline: a page's attention views load d3 and jQuery from the site, never from a CDN.

The HTML below is what bertviz writes in front of and inside each view
(its require.js tag, its ``require.config`` paths and its ``requirejs``
call), so these tests need neither bertviz nor a model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")

import bertviz_offline  # noqa: E402

VIEW = """<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"></script>
<div id="bertviz-1"></div>
<script type="text/javascript">
require.config({
  paths: {
      d3: 'https://cdnjs.cloudflare.com/ajax/libs/d3/5.7.0/d3.min',
    jquery: 'https://cdnjs.cloudflare.com/ajax/libs/jquery/2.0.0/jquery.min',
  }
});
requirejs(['jquery', 'd3'], function ($, d3) { draw(); });
</script>
"""


def test_a_view_is_counted_by_its_requirejs_call():
    assert bertviz_offline.count_views(VIEW) == 1
    assert bertviz_offline.count_views(VIEW + VIEW) == 2
    assert bertviz_offline.count_views("<p>requirejs is a word here</p>") == 0


def test_bertvizs_own_html_loads_from_other_hosts():
    found = bertviz_offline.external_references(VIEW)
    assert len(found) == 3 and all("cdnjs" in reference for reference in found)


def test_rewriting_removes_the_require_tag_and_points_the_paths_at_the_site():
    rewritten = bertviz_offline.rewrite_views(VIEW + VIEW, "../_static/")
    assert "require.min.js" not in rewritten and "cdnjs" not in rewritten
    assert bertviz_offline.external_references(rewritten) == []
    assert rewritten.count("d3: '../_static/vendor/d3/d3.min'") == 2
    assert rewritten.count("jquery: '../_static/vendor/jquery/jquery.min'") == 2
    assert bertviz_offline.count_views(rewritten) == 2  # the views themselves are untouched


def test_a_reference_the_rewrite_does_not_know_is_still_reported():
    other = VIEW.replace("</script>\n", '</script>\n<script src="https://unpkg.com/new-lib.js"></script>\n', 1)
    left = bertviz_offline.external_references(bertviz_offline.rewrite_views(other, "_static/"))
    assert left == ['src="https://unpkg.com/new-lib.js"']


def test_local_addresses_are_not_external():
    assert bertviz_offline.external_references("<script src='http://127.0.0.1:8000/x.js'></script>") == []


def test_only_pages_with_views_over_the_limit_are_oversized(tmp_path):
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "big_view.html").write_text(VIEW + " " * 5000)
    (tmp_path / "small_view.html").write_text(VIEW)
    (tmp_path / "big_text.html").write_text("x" * 50_000)  # large, but no view
    found = bertviz_offline.oversized_pages(tmp_path, len(VIEW) + 1000)
    assert [(Path(path).relative_to(tmp_path).as_posix(), size) for path, size in found] == [
        ("chapters/big_view.html", len(VIEW) + 5000)
    ]


def test_the_scripts_the_pages_load_are_in_the_static_folder_or_the_package():
    # The libraries are the site's copies; the shim is the package's own, which the build copies into _static.
    for script in bertviz_offline.SCRIPTS:
        assert (ROOT / "docs" / "_static" / script).is_file() or script == bertviz_offline.SHIM.name, script
    assert bertviz_offline.SHIM.is_file()


def test_a_build_serves_the_packages_shim_in_its_static_folder(tiny_site):
    tiny_site.conf(["bertviz_offline"])
    tiny_site.write("docs/index.rst", "Home\n====\n")
    tiny_site.build()
    served = tiny_site.build_dir / "html" / "_static" / bertviz_offline.SHIM.name
    assert served.read_bytes() == bertviz_offline.SHIM.read_bytes()


# ---------------------------------------------------------------------------
# The same on the HTML bertviz itself writes for this package's views
# ---------------------------------------------------------------------------
def _real_views() -> str:
    import torch

    from literate_transformer import visualize

    attentions = [torch.softmax(torch.randn(1, 3, 7, 7), dim=-1) for _ in range(2)]
    tokens = ["[CLS]", "time", "flies", "like", "an", "arrow", "[SEP]"]
    return visualize.head_view(attentions, tokens).data, visualize.model_view(attentions, tokens).data


def test_the_packages_views_lose_their_inlined_libraries_which_the_page_loads_once():
    from literate_transformer import visualize

    html = "".join(_real_views())
    assert bertviz_offline.count_views(html) == 2
    assert html.count(visualize.OFFLINE_SCRIPT_MARK) == 2  # each view carries jQuery, d3 and the shim
    rewritten = bertviz_offline.rewrite_views(html, "../_static/")
    assert visualize.OFFLINE_SCRIPT_MARK not in rewritten and "cdnjs" not in rewritten
    assert bertviz_offline.external_references(rewritten) == []
    assert len(rewritten) < len(html) - 2 * 300_000
    assert bertviz_offline.count_views(rewritten) == 2


def test_a_view_bertviz_writes_itself_is_rewritten_to_the_local_copies():
    import bertviz
    import torch

    attentions = [torch.softmax(torch.randn(1, 3, 7, 7), dim=-1) for _ in range(2)]
    html = bertviz.head_view(attentions, ["[CLS]", "a", "b", "c", "d", "e", "[SEP]"], html_action="return").data
    assert bertviz_offline.external_references(html)  # bertviz's own HTML loads from a CDN
    rewritten = bertviz_offline.rewrite_views(html, "../_static/")
    assert "cdnjs" not in rewritten and "require.min.js" not in rewritten
    assert bertviz_offline.external_references(rewritten) == []
    assert rewritten.count("d3: '../_static/vendor/d3/d3.min'") == 1
    assert rewritten.count("jquery: '../_static/vendor/jquery/jquery.min'") == 1


def test_pages_with_real_views_over_the_limit_are_found(tmp_path):
    view, _ = _real_views()
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "big_view.html").write_text(view + " " * 5000, encoding="utf-8")
    (tmp_path / "small_view.html").write_text(view, encoding="utf-8")
    (tmp_path / "big_text.html").write_text("x" * 50_000)  # large, but no view
    size = len(view.encode("utf-8"))  # the inlined d3 holds characters of more than one byte
    found = bertviz_offline.oversized_pages(tmp_path, size + 1000)
    assert [(path.relative_to(tmp_path).as_posix(), size) for path, size in found] == [
        ("chapters/big_view.html", size + 5000)
    ]
