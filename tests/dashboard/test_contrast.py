"""Status badges meet WCAG AA: their text is at least 4.5:1 against their background
(they are 12 px text, so the large-text 3:1 allowance does not apply)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CSS = Path(__file__).resolve().parents[2] / "static" / "planwatch"
RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")


def luminance(hex_colour: str) -> float:
    value = hex_colour.lstrip("#")
    if len(value) == 3:
        value = "".join(c * 2 for c in value)
    channels = [int(value[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def badge_colours() -> dict[str, tuple[str, str]]:
    """Each ``.status-*`` rule that sets both colours (not the task cards, which use ink)."""
    text = "\n".join(p.read_text() for p in sorted(CSS.glob("*.css")))
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    variables = dict(re.findall(r"(--[\w-]+):\s*(#[0-9a-fA-F]{3,6})", text))
    found: dict[str, tuple[str, str]] = {}
    for selectors, body in RULE.findall(text):
        props = dict(re.findall(r"(background|color):\s*([^;]+);?", body))
        if "background" not in props or "color" not in props:
            continue
        bg, fg = (re.sub(r"var\((--[\w-]+)\)", lambda m: variables[m.group(1)],
                         props[k].strip()) for k in ("background", "color"))
        for selector in selectors.split(","):
            selector = selector.strip()
            if re.fullmatch(r"\.(status-[\w-]+|badge)", selector):
                found[selector] = (fg, bg)
    return found


def test_every_status_badge_is_found():
    assert {".badge", ".status-interrupted", ".status-running", ".status-succeeded",
            ".status-failed", ".status-queued", ".status-waiting"} <= set(badge_colours())


@pytest.mark.parametrize("selector", sorted(badge_colours()))
def test_a_status_badge_meets_wcag_aa(selector):
    fg, bg = badge_colours()[selector]
    assert contrast(fg, bg) >= 4.5, f"{selector}: {fg} on {bg} is {contrast(fg, bg):.2f}:1"


def test_the_contrast_formula_is_the_wcag_one():
    assert round(contrast("#000000", "#ffffff"), 1) == 21.0
    assert round(contrast("#a86200", "#fff1d6"), 2) == 4.26  # the old "Interrupted" badge
