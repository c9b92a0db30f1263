"""The build's profile: every handler of the build's own process timed, the phases between them."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (the docs extras); the extension is not tested")

import build_profile  # noqa: E402

SLOW = """
import time


def slow(app):
    time.sleep(0.6)


def setup(app):
    app.connect("builder-inited", slow)
    return {"parallel_read_safe": True}
"""


def test_a_slow_handler_is_named_in_the_profile_with_its_time(tiny_site):
    tiny_site.write("slowext.py", SLOW)
    tiny_site.write(
        "docs/conf.py",
        f"""
        import sys
        sys.path.insert(0, {str(tiny_site.root)!r})
        extensions = ["build_profile", "slowext"]
        build_profile_file = "../profile.json"
        """,
    )
    tiny_site.write("docs/index.rst", "Index\n=====\n")
    tiny_site.build()
    rows = dict(json.loads((tiny_site.root / "profile.json").read_text())["rows"])
    assert 0.6 <= rows["builder-inited: slowext.slow"] < 5
    assert rows["the whole build"] >= rows["builder-inited: slowext.slow"]
    assert "reading the pages (parsing, executing; every reading process)" in rows


def test_quick_handlers_are_summed_in_one_line():
    profile = {"started": 0.0, "marks": {}, "handlers": {"a: x": 0.1, "b: y": 0.2, "c: z": 2.0}}
    rows = build_profile.profile_rows(profile, finished=3.0)
    assert rows[0] == ("c: z", 2.0)
    assert rows[1][0].startswith("every other handler") and rows[1][1] == pytest.approx(0.3)
    assert rows[-1] == ("the whole build", 3.0)
