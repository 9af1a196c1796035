"""The gallery: one page per script in ``examples/``, written at build time.

Each page shows the example's docstring (what it does, on which data, against which baselines),
the command that runs it, the tables it printed and the figures it saved in its quick mode, and
its code. The build itself runs no example (training takes minutes and CI builds the site in
about a minute): the examples' tests, run with ``SEQATTN_GALLERY_OUTPUTS`` set as CI does
(tests/examples/conftest.py), or ``python docs/gallery_outputs.py``, keep what each example
printed and drew in ``docs/_gallery_outputs/<example>/``, and the pages include whatever is
there. A page whose example has not been run says how to fill it in.

This stands in for sphinx-gallery, which wants every example's first docstring line to be a
reStructuredText title and would run the examples inside the build; the examples here are
command-line scripts with ``--quick`` modes that their tests already run.
"""
import ast
from pathlib import Path

OUTPUT_DIR = "_gallery_outputs"
PAGES = "gallery"


def examples(root):
    return sorted(p for p in (root / "examples").glob("*.py") if not p.name.startswith("_"))


def split_docstring(path):
    """(title, body, first code line) of an example script."""
    source = path.read_text()
    tree = ast.parse(source)
    doc = ast.get_docstring(tree, clean=True)
    if not doc:
        raise ValueError(f"{path} has no docstring: the gallery page is made from it")
    first = tree.body[0]
    # The title is the first sentence of the first paragraph (which may wrap over lines);
    # the rest of that paragraph opens the page's text.
    paragraph, _, rest = doc.partition("\n\n")
    paragraph = " ".join(line.strip() for line in paragraph.splitlines())
    end = paragraph.find(". ")
    title, lead = (paragraph, "") if end < 0 else (paragraph[:end], paragraph[end + 2:])
    body = "\n\n".join(part for part in (lead, rest.strip("\n")) if part)
    return title.rstrip(".").strip(), body, first.end_lineno + 1


def underline(text, char):
    return [text, char * len(text)]


def page(path, docs):
    stem = path.stem
    title, body, code_start = split_docstring(path)
    lines = [f".. _gallery-{stem}:", ""] + underline(title, "=") + [""]
    lines += [body, "", ".. rubric:: Run it", "", ".. code-block:: bash", "",
              f"   python examples/{path.name} --quick", ""]
    outputs = docs / OUTPUT_DIR / stem
    printed = outputs / "output.txt"
    figures = figures_of(docs, stem)
    if printed.exists() or figures:
        lines += [".. rubric:: What a quick run printed and drew", ""]
        if printed.exists():
            lines += [f".. literalinclude:: /{OUTPUT_DIR}/{stem}/output.txt",
                      "   :language: text", ""]
        for figure in figures:
            lines += [f".. image:: /{OUTPUT_DIR}/{stem}/{figure.name}",
                      f"   :alt: {figure.stem.replace('_', ' ')}", ""]
    else:
        lines += [".. note::", "",
                  "   This build did not include the example's outputs: "
                  "``python docs/gallery_outputs.py " + stem + "`` runs its quick mode and keeps "
                  "its printed tables and figures for the next build (CI keeps those of the "
                  "example's test run instead).", ""]
    lines += [".. rubric:: The code", "",
              f".. literalinclude:: /../examples/{path.name}",
              "   :language: python", f"   :lines: {code_start}-", ""]
    return "\n".join(lines)


def figures_of(docs, stem):
    outputs = docs / OUTPUT_DIR / stem
    return sorted(outputs.glob("*.png")) if outputs.is_dir() else []


def index(paths, docs):
    lines = [".. _gallery:", ""] + underline("Gallery of examples", "=") + [""]
    lines += [
        "Each example runs the whole seqattn path on real or physically generated data: a "
        "Dataset, an adapter, a model trained with ``fit``, predictions put back on the "
        "Dataset's coordinates, and the baselines computed in the same script. Every example "
        "has a ``--quick`` mode, which the tests in ``tests/examples`` run; figures and tables "
        "shown here come from those quick runs, kept by the tests in CI (see "
        ":ref:`docs-build`).", "",
        ".. list-table::", "   :header-rows: 1", "   :widths: 25 50 25", "",
        "   * - Example", "     - What it does", "     - Its first figure"]
    for path in paths:
        title, _, _ = split_docstring(path)
        lines += [f"   * - :ref:`{path.stem} <gallery-{path.stem}>`", f"     - {title}"]
        figures = figures_of(docs, path.stem)
        if figures:
            lines += [f"     - .. image:: /{OUTPUT_DIR}/{path.stem}/{figures[0].name}",
                      f"          :alt: {path.stem}", "          :width: 220px"]
        else:
            lines += ["     -"]
    lines += ["", ".. toctree::", "   :hidden:", ""] + [f"   {p.stem}" for p in paths] + [""]
    return "\n".join(lines)


def benchmark_table(root):
    """The benchmark scripts as a table: each script, what its docstring says it measures."""
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 30 70", "",
             "   * - Command", "     - What it measures"]
    for path in sorted((root / "benchmarks").glob("*.py")):
        if path.name.startswith("_"):
            continue
        title, _, _ = split_docstring(path)
        lines += [f"   * - ``python benchmarks/{path.name}``", f"     - {title}"]
    return "\n".join(lines + [""])


def write(path, text):
    if not path.exists() or path.read_text() != text:  # unchanged pages keep their mtime
        path.write_text(text)


def write_pages(app, config=None):
    docs = Path(app.srcdir)
    out = docs / PAGES
    out.mkdir(exist_ok=True)
    paths = examples(docs.parent)
    for path in paths:
        write(out / f"{path.stem}.rst", page(path, docs))
    write(out / "index.rst", index(paths, docs))
    generated = docs / "_generated"
    generated.mkdir(exist_ok=True)
    write(generated / "benchmark_scripts.rst", benchmark_table(docs.parent))


def setup(app):
    app.connect("config-inited", write_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
