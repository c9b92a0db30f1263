"""The README's words agree with what the project measures and contains."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_readme_says_what_the_try_page_downloads_within_the_budget_the_browser_test_states():
    # The browser test prints the bytes the try page downloads before its first result (38.8 MB last measured).
    said = float(re.search(r"downloads about (\d+) MB from the site", README).group(1))
    budget = float(
        re.search(r"budgets are (\d+) MB", (ROOT / "tests" / "browser" / "test_try.py").read_text()).group(1)
    )
    assert said <= budget, f"the README says {said} MB, over the try page's budget of {budget} MB"


def test_the_readmes_layout_names_every_part_of_the_package():
    from literate_transformer import manifest

    for part, _ in manifest.LAYOUT:
        if part == "manifest":
            continue
        path = f"literate_transformer/{part}/" if (ROOT / "literate_transformer" / part).is_dir() else f"{part}.py"
        assert path in README, f"the README's layout leaves out {path}"
