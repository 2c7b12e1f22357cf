"""Every relative link in README.md and docs/ resolves: the file exists and, for a link with a
#fragment into a Markdown file, the heading exists (GitHub's anchor rule)."""
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {anchor(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, flags=re.M)}


def test_anchor_rule_on_hand_worked_headings():
    assert anchor("Input: the episode table") == "input-the-episode-table"
    assert anchor("Stage 3: tiers (the only threshold-dependent step)") == \
        "stage-3-tiers-the-only-threshold-dependent-step"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # http(s), mailto: outside the repository
            continue
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)}: links that do not resolve: {broken}"


@pytest.mark.parametrize("page", sorted((REPO / "docs").glob("*.md")), ids=lambda p: p.name)
def test_every_doc_stays_under_2500_words(page):
    # a part's doc is a reference for its reader, not a notebook: `wc -w` counts the same
    words = len(page.read_text(encoding="utf-8").split())
    assert words < 2500, f"{page.relative_to(REPO)}: {words} words; the limit is 2,500"
