"""How the HTML report reads: whole-word headers, tables that scroll, even decimals."""

from __future__ import annotations

import re
from pathlib import Path

from helpers import mpsprof_cli

REPO = Path(__file__).resolve().parents[2]
RECORDING = REPO / "tests" / "fixtures" / "recordings" / "slow_dataloader"


def test_html_tables_keep_words_whole_and_figures_even(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    proc = mpsprof_cli("report", str(RECORDING), "--format", "html", "-o", str(out), timeout=120)
    assert proc.returncode == 0, proc.stderr
    page = out.read_text(encoding="utf-8")
    css = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    # headers never break inside a word (CATEGO RY, KIN D), cells only inside a word too long for any line
    th_rules = " ".join(m.group(1) for m in re.finditer(r"(?:^|\})\s*th\s*\{([^}]*)\}", css))
    assert "overflow-wrap: normal" in th_rules and "keep-all" in th_rules
    assert "anywhere" not in re.search(r"th, td \{([^}]*)\}", css).group(1)
    # every table (figures and the findings' evidence tables) scrolls in its own box
    assert page.count("<table>") == page.count('<div class="tscroll"><table>') > 2
    figures = re.findall(r'<td class="num">([^<]*)</td>', page)
    decimals = [f for f in figures if "." in f]
    assert decimals and all(re.fullmatch(r"-?[\d,]+\.\d\d", f) for f in decimals), decimals
