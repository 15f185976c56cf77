"""What a reader must not see in a report's visible text (scripts, styles and the embedded config
aside): numbers in e-notation, an interval of zero width ("96 [96, 96]"), a share or an efficiency
whose interval goes below 0, "(s)" plurals, and GPU-hours on a study that ran on no GPU.

`findings(html)` lists each with its context, so a failing test says where to look."""

from __future__ import annotations

import re
from html.parser import HTMLParser

# elements whose text is not read as prose: code, the config as YAML, scripts, styles
HIDDEN = {"script", "style", "title", "code", "pre"}
BLOCKS = {"p", "div", "tr", "td", "th", "li", "h1", "h2", "h3", "h4", "br", "section", "caption", "summary", "dt", "dd"}
NUMBER = r"-?\d[\d,]*(?:\.\d+)?"
PATTERNS = {
    "e-notation": re.compile(r"(?<![\w.])\d(?:\.\d+)?e[+-]?\d+\b"),
    # the same number three times: value [lo, hi] with lo = hi = value, in any unit
    "zero-width interval": re.compile(rf"(?<![\d.,])({NUMBER})(\s*[%×a-zµ/]*)\s*\[\s*\1\2?\s*,\s*\1\2?\s*\]"),
    "negative share": re.compile(r"\[\s*-\d[\d.]*%"),
    "(s) plural": re.compile(r"[a-z]\((?:s|es)\)"),
}


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hidden, self.parts = 0, []

    def handle_starttag(self, tag, attrs):
        self.hidden += tag in HIDDEN
        if tag in BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        self.hidden -= tag in HIDDEN

    def handle_data(self, data):
        if not self.hidden:
            self.parts.append(data)


def visible_text(html: str) -> str:
    p = _Text()
    p.feed(html)
    return re.sub(r"[ \t]+", " ", "".join(p.parts))


def findings(html: str, gpu: bool | None = None) -> list[str]:
    """'kind: …context…' per finding; `gpu` False (a study whose ranks ran on CPUs) also flags
    GPU-hours."""
    text = visible_text(html)
    out = []
    for kind, pat in PATTERNS.items():
        for m in pat.finditer(text):
            out.append(f"{kind}: …{text[max(0, m.start() - 50):m.end() + 20]}…".replace("\n", " | "))
    if gpu is False:  # (Terms defines both units: not a use of either)
        used = visible_text(html.split('<section id="terms">')[0])
        out += [f"GPU-hours on CPUs: …{used[max(0, m.start() - 50):m.end() + 20]}…".replace("\n", " | ")
                for m in re.finditer(r"GPU-h", used)]
    return out
