"""The user guide's code runs as written: every page that carries the marker below has its
Python blocks executed in order, in one namespace, as a reader would paste them into a
notebook. Pages whose code needs data of the reader's own (``ds = ...``) carry no marker."""
import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "user_guide"
MARKER = "<!-- tests/docs/test_user_guide_code.py runs this page's Python blocks, in order -->"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

RUNNABLE = sorted(page for page in GUIDE.glob("*.md") if MARKER in page.read_text())


def test_some_pages_are_run():
    assert [page.name for page in RUNNABLE] == ["first_forecast.md", "own_model.md"]


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda page: page.name)
def test_the_code_blocks_of_a_page_run(page):
    blocks = BLOCK.findall(page.read_text())
    assert blocks, f"{page.name} carries the marker but has no Python block"
    namespace = {"__name__": f"user_guide_{page.stem}"}
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"{page.name} (block {number})", "exec"), namespace)


def test_the_blocks_are_found_as_a_reader_sees_them():
    """The block pattern takes each fenced Python block whole and nothing else (a plant: a
    text block and a bash block between them are left out)."""
    text = "```python\na = 1\n```\n\n```text\nb = 2\n```\n```bash\nls\n```\n```python\nc = a\n```\n"
    assert BLOCK.findall(text) == ["a = 1\n", "c = a\n"]
