"""The runtime values beside the annotated source open in a real browser, by keyboard as well as by mouse.

On the annotated page of the BERT model, the first line that shows a
runtime shape is focused with the keyboard (Tab, as a reader without a
mouse would): its preview must appear, name the same shape, give the
tensor's statistics, and, for a matrix, draw its heatmap; Escape closes it.
A click opens the preview of another line and keeps it open.  The console
must show no error and no request may leave 127.0.0.1.  The page is also
opened in dark mode, where the preview must stay legible (its text darker or
lighter than its background by a clear margin).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

PAGE = "source/literate_transformer.models.bert.html"


def _open(browser, site_url, recorder, dark=False):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    if dark:
        # pydata-sphinx-theme reads the reader's choice from localStorage before it draws.
        context.add_init_script("localStorage.setItem('mode', 'dark'); localStorage.setItem('theme', 'dark');")
    page = context.new_page()
    record = recorder(page)
    page.goto(site_url + PAGE, wait_until="load")
    return context, page, record


def _focus_first_value_by_keyboard(page) -> str:
    """Tab from the start of the listing until a runtime value has the focus; return its shape."""
    page.locator(".lt-sbs").first.scroll_into_view_if_needed()
    page.evaluate("() => document.querySelector('.lt-rt').previousElementSibling?.focus?.()")
    for _ in range(400):
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.classList.contains('lt-rt')"):
            return page.evaluate("() => document.activeElement.querySelector('.lt-rt-shape').textContent")
    pytest.fail("no runtime value took the focus after 400 presses of Tab")


def test_a_focused_line_shows_its_preview(browser, site_url, recorder, screenshots):
    context, page, record = _open(browser, site_url, recorder)
    try:
        assert page.locator(".lt-rt").count() > 20, "the BERT page shows few runtime values"
        shape = _focus_first_value_by_keyboard(page)
        panel = page.locator("#lt-rt-float")
        panel.wait_for(state="visible", timeout=5000)
        text = panel.inner_text()
        assert shape in text and "mean" in text and "first values" in text
        # The statistics say in which precision they were computed (float64: a masked score's mean stays finite).
        assert "in float64: mean" in text
        assert page.evaluate("() => document.activeElement.getAttribute('aria-describedby')") == "lt-rt-float"
        page.screenshot(path=str(screenshots / "runtime-value-focused.png"))
        page.keyboard.press("Escape")
        assert not panel.is_visible()
        # A click pins the preview of a matrix-valued line, with its heatmap drawn.
        matrix = page.locator(".lt-rt:has(.lt-rt-heatmap)").first
        matrix.scroll_into_view_if_needed()
        matrix.click()
        assert panel.is_visible() and panel.locator("canvas").count() == 1
        assert matrix.get_attribute("aria-expanded") == "true"
        page.mouse.move(5, 5)
        assert panel.is_visible(), "a clicked preview stays open when the mouse leaves"
    finally:
        context.close()
    record.check()


def _luminance(rgb: str) -> float:
    values = [float(part) for part in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3]]
    return sum(weight * value / 255 for weight, value in zip((0.2126, 0.7152, 0.0722), values, strict=True))


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_the_preview_is_legible_in_both_modes(browser, site_url, recorder, dark):
    context, page, record = _open(browser, site_url, recorder, dark=dark)
    try:
        value = page.locator(".lt-rt").first
        value.scroll_into_view_if_needed()
        value.focus()
        panel = page.locator("#lt-rt-float")
        panel.wait_for(state="visible", timeout=5000)
        colours = panel.evaluate("e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]")
        contrast = abs(_luminance(colours[0]) - _luminance(colours[1]))
        assert contrast > 0.5, f"text {colours[0]} on {colours[1]} in {'dark' if dark else 'light'} mode"
    finally:
        context.close()
    record.check()
