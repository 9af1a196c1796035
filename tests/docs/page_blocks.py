"""The code a page shows, read from the page itself: the tests that run the README's and the
user guide's walkthroughs execute exactly what a reader copies."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GUIDE = ROOT / "docs" / "user_guide"
FENCED_PYTHON = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def block_after(page, heading):
    """The first fenced Python block after the line `heading` of the Markdown file `page`."""
    text = Path(page).read_text()
    start = re.search(rf"^{re.escape(heading)}$", text, re.M)
    assert start, f"{Path(page).name} has no heading {heading!r}"
    found = FENCED_PYTHON.search(text, start.end())
    assert found, f"{Path(page).name} shows no Python block after {heading!r}"
    return found.group(1)


def run_block(page, heading, namespace=None):
    """Execute that block in `namespace` (the reader's own variables) and return the namespace."""
    namespace = {} if namespace is None else namespace
    code = block_after(page, heading)
    exec(compile(code, f"{Path(page).name}, after {heading!r}", "exec"), namespace)
    return namespace
