"""The gallery check: every example script has its page, and the page shows the script's own figure."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")

import gallery_check  # noqa: E402


def _gallery(tmp_path, pages: dict[str, str]):
    examples, html = tmp_path / "gallery", tmp_path / "html"
    (html / "auto_examples").mkdir(parents=True)
    examples.mkdir()
    for stem in ("plot_a", "plot_b"):
        (examples / f"{stem}.py").write_text("")
    (examples / "helper.py").write_text("")  # not an example: not checked
    for stem, body in pages.items():
        (html / "auto_examples" / f"{stem}.html").write_text(body)
    return examples, html


def test_nothing_is_missing_when_every_example_shows_its_figure(tmp_path):
    examples, html = _gallery(
        tmp_path,
        {
            "plot_a": '<img src="../_images/sphx_glr_plot_a_001.png">',
            "plot_b": '<img src="../_images/sphx_glr_plot_b_002.svg">',
        },
    )
    assert gallery_check.missing_gallery_outputs(examples, html, "auto_examples") == []


def test_a_missing_page_and_a_page_without_its_own_figure_are_named(tmp_path):
    # plot_b's page shows only another example's figure and its own thumbnail.
    examples, html = _gallery(
        tmp_path, {"plot_b": '<img src="sphx_glr_plot_a_001.png"><img src="sphx_glr_plot_b_thumb.png">'}
    )
    problems = gallery_check.missing_gallery_outputs(examples, html, "auto_examples")
    assert [problem.split(":")[0] for problem in problems] == ["plot_a.py", "plot_b.py"]
    assert "no page" in problems[0] and "shows no figure" in problems[1]


def _app(tmp_path, plot_gallery: bool):
    examples, html = _gallery(tmp_path, {})
    return SimpleNamespace(
        builder=SimpleNamespace(format="html"),
        config=SimpleNamespace(
            sphinx_gallery_conf={
                "examples_dirs": str(examples),
                "gallery_dirs": "auto_examples",
                "plot_gallery": plot_gallery,
            }
        ),
        confdir=str(tmp_path),
        outdir=str(html),
        statuscode=0,
    )


def test_a_build_with_missing_outputs_fails(tmp_path):
    app = _app(tmp_path, plot_gallery=True)
    gallery_check.check_gallery(app, None)
    assert app.statuscode == 1


def test_a_build_that_did_not_run_the_examples_is_not_checked(tmp_path):
    app = _app(tmp_path, plot_gallery=False)
    gallery_check.check_gallery(app, None)
    assert app.statuscode == 0


def test_gallery_pages_are_left_to_sphinx_gallerys_own_code_links():
    transforms = {"auto_examples/plot_a": [1], "auto_examples/index": [2], "chapters/02_attention": [3], "api": [4]}
    app = SimpleNamespace(
        env=SimpleNamespace(sphinx_codeautolink_transforms=transforms),
        config=SimpleNamespace(sphinx_gallery_conf={"gallery_dirs": "auto_examples"}),
    )
    gallery_check.leave_gallery_code_to_sphinx_gallery(app, app.env)
    assert transforms == {"chapters/02_attention": [3], "api": [4]}
