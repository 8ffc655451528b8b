"""tools/cjk_font.py: the web font subset holds exactly the Chinese characters the book's sources use."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import cjk_font  # noqa: E402


def sources(root: Path) -> Path:
    (root / "book").mkdir()
    (root / "data").mkdir()
    (root / "book" / "a.md").write_text(
        "# 主题 and topic\n\n分区, “quotes” and ǔ stay out\n", encoding="utf-8"
    )
    (root / "data" / "g.csv").write_text("chinese\n偏移量\n主题\n", encoding="utf-8")
    return root


def test_used_characters_are_the_cjk_ones_of_the_sources(tmp_path: Path) -> None:
    assert cjk_font.used_characters(sources(tmp_path)) == "".join(sorted("主题分区偏移量"))


@pytest.mark.skipif(
    cjk_font.installed_font() is None, reason="no CJK font installed (tools/ensure_cjk_font.sh)"
)
def test_subset_has_the_glyphs_and_a_css_that_puts_it_first_for_cjk_only(tmp_path: Path) -> None:
    from fontTools.ttLib import TTFont

    chars = cjk_font.used_characters(sources(tmp_path))
    out = tmp_path / "fonts"
    assert not cjk_font.up_to_date(chars, out)
    woff = cjk_font.write_subset(cjk_font.installed_font(), chars, out)
    font = TTFont(str(woff))
    assert font.flavor == "woff"
    assert {chr(c) for c in font.getBestCmap()} >= set(chars)
    assert len(font.getGlyphOrder()) < 50, "the subset should hold only the characters asked for"
    css = (out / "kafkalite-cjk.css").read_text(encoding="utf-8")
    assert 'src: url("kafkalite-cjk.woff") format("woff")' in css
    assert "unicode-range: U+3000-303F, U+3400-4DBF, U+4E00-9FFF, U+FF00-FFEF" in css
    assert '--pst-font-family-base: "kafkalite CJK", var(--pst-font-family-base-system)' in css
    assert (out / "LICENSE-cjk-font.txt").read_text(encoding="utf-8").strip()
    assert cjk_font.up_to_date(chars, out)
    assert not cjk_font.up_to_date(chars + "压", out), "a new character makes the subset out of date"


def test_a_character_the_font_lacks_is_an_error(tmp_path: Path) -> None:
    font = cjk_font.installed_font()
    if font is None:
        pytest.skip("no CJK font installed")
    with pytest.raises(ValueError, match="has no glyph"):
        cjk_font.write_subset(font, "主\U0002a6d6", tmp_path)  # an extension B ideograph
