"""Relative links between the Markdown files we ship lead somewhere: the file exists and, for a
``#fragment``, the target file has a heading with that anchor (GitHub's rule: lower case, spaces
to hyphens, punctuation dropped)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [
        *REPO.glob("*.md"),
        *(REPO / "docs").glob("*.md"),
        REPO / "deploy" / "README.md",
        REPO / "bench" / "README.md",
    ]
)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: no heading #{fragment} in {dest.relative_to(REPO)}")
    assert broken == []


def test_the_release_files_exist_and_the_readme_links_them() -> None:
    for name in ("CHANGELOG.md", "CONTRIBUTING.md", "SECURITY.md", "docs/contracts.md", "docs/operations.md"):
        assert (REPO / name).is_file(), name
    readme = (REPO / "README.md").read_text()
    for name in ("docs/operations.md", "docs/contracts.md", "CONTRIBUTING.md", "SECURITY.md", "CHANGELOG.md"):
        assert f"]({name})" in readme, name
