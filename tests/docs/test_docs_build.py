"""The documentation site builds with warnings as errors, and the checks it relies on catch what
they are meant to catch.

The full build (about half a minute on 2 cores) renders the user guide, the API reference from
the docstrings and the gallery pages; it runs no example (docs/_ext/example_gallery.py says why).
"""
import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS))

import api_pages  # noqa: E402  (docs/_ext, on the path just above)
import check_site  # noqa: E402  (docs/check_site.py)


def sphinx_build(source, out, *extra):
    """Run `python -m sphinx -W` (every warning an error) on `source`; (exit code, output)."""
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html",
               "-d", str(out / "doctrees"), *extra, str(source), str(out / "html")]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600)
    return run.returncode, run.stdout + run.stderr


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs")
    code, output = sphinx_build(DOCS, out)
    assert code == 0, f"the documentation build failed or warned:\n{output[-6000:]}"
    return out / "html"


def test_the_site_builds_with_warnings_as_errors(built_site):
    for page in ("index.html", "user_guide/index.html", "gallery/index.html",
                 "api/index.html", "changelog.html", "design/design.html"):
        assert (built_site / page).stat().st_size > 0, page


def test_the_pages_a_reader_opens_have_no_broken_links_or_images(built_site):
    """docs/check_site.py's checks without the browser: the front page, a user-guide page, a
    gallery page and an API page link only to files and anchors that exist, and every image
    they show decodes."""
    pages = check_site.pick_pages(built_site)
    assert len(pages) == 4
    assert check_site.parse(built_site / "user_guide" / "vectors.html").images, \
        "the everything-is-a-vector page lost its picture"
    problems = [problem for page in pages for problem in check_site.check_page(page)]
    assert problems == []


def test_the_site_check_finds_a_broken_link_and_a_missing_image(tmp_path):
    page = tmp_path / "page.html"
    (tmp_path / "there.html").write_text('<h1 id="top">there</h1>')
    page.write_text('<a href="there.html#top">ok</a> <a href="there.html#nowhere">anchor</a> '
                    '<a href="gone.html">gone</a> <img src="missing.png">')
    problems = check_site.check_page(page)
    assert len(problems) == 3, problems
    assert any("gone.html" in p for p in problems) and any("missing.png" in p for p in problems)
    assert any("#nowhere" in p for p in problems)


def test_the_site_check_finds_a_figure_cut_short(tmp_path):
    """A PNG whose header is whole but whose pixels are cut short opens (Pillow reads the
    header only) and Chromium draws its first rows; the check decodes it whole."""
    from PIL import Image
    Image.effect_noise((200, 200), 40).save(tmp_path / "figure.png")
    (tmp_path / "page.html").write_text('<img src="figure.png">')
    assert check_site.check_page(tmp_path / "page.html") == []
    whole = (tmp_path / "figure.png").read_bytes()
    (tmp_path / "figure.png").write_bytes(whole[:len(whole) // 2])
    problems = check_site.check_page(tmp_path / "page.html")
    assert len(problems) == 1 and "truncated" in problems[0], problems


def tiny_site(root, gallery_page):
    """The four pages check_site.py opens, each with something to see; `gallery_page` is the
    gallery page's HTML."""
    page = '<h1>seqattn</h1><div style="background:#2a6;width:900px;height:700px"></div>'
    for path in ("index.html", "user_guide/vectors.html", "api/generated/seqattn.nn.Linear.html"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(page)
    (root / "gallery").mkdir()
    (root / "gallery" / "example.html").write_text(page + gallery_page)


def test_ci_requires_a_gallery_page_with_a_figure(tmp_path):
    """`check_site.py --gallery-figures` (CI's check) fails on a site whose gallery shows no
    figure, and passes once a gallery page shows one."""
    tiny_site(tmp_path, "")
    assert check_site.main([str(tmp_path), "--gallery-figures"]) == 1
    assert check_site.main([str(tmp_path)]) == 0
    from PIL import Image
    Image.new("RGB", (4, 4), "red").save(tmp_path / "gallery" / "figure.png")
    (tmp_path / "gallery" / "example.html").write_text('<img src="figure.png">')
    assert check_site.main([str(tmp_path), "--gallery-figures"]) == 0


def test_the_browser_check_opens_the_figures_and_finds_one_it_cannot_draw(tmp_path, monkeypatch):
    """In Chromium (CI installs it): a site whose figure draws passes, given as a relative path
    as CI gives it; the same figure cut short fails."""
    browser = check_site.find_browser()
    if browser is None:
        pytest.skip("no Chromium here (CI installs Debian's chromium)")
    from PIL import Image, ImageDraw
    site = tmp_path / "site"
    tiny_site(site, '<img src="figure.png">')
    figure = Image.new("RGB", (400, 300), "white")
    ImageDraw.Draw(figure).line([(0, 300), (400, 0)], fill="navy", width=8)
    figure.save(site / "gallery" / "figure.png")
    monkeypatch.chdir(tmp_path)
    assert check_site.main(["site", "--browser", "--gallery-figures"]) == 0
    assert (site / "_screenshots" / "gallery_figure.png.png").exists()
    whole = (site / "gallery" / "figure.png").read_bytes()
    (site / "gallery" / "figure.png").write_bytes(whole[:60])
    problems = check_site.browse(browser, site, check_site.pick_pages(site))
    assert len(problems) == 1 and "figure.png" in problems[0], problems


def test_every_public_name_has_an_api_page(built_site):
    """Each name in a public package's __all__ has a page, under the package that documents
    it (a name two packages export is documented once)."""
    documented, _, _ = api_pages.plan()
    assert sum(len(names) for kinds in documented.values() for names in kinds.values()) > 200
    for package, kinds in documented.items():
        module = importlib.import_module(package)
        for names in kinds.values():
            for name in names:
                page = built_site / "api" / "generated" / f"{package}.{name}.html"
                assert page.exists(), f"{package}.{name} has no API page"
                assert getattr(module, name) is not None


def test_every_example_has_a_gallery_page(built_site):
    examples = sorted((DOCS.parent / "examples").glob("*.py"))
    assert examples
    index = (built_site / "gallery" / "index.html").read_text()
    for example in examples:
        assert (built_site / "gallery" / f"{example.stem}.html").exists(), example.name
        assert f"{example.stem}.html" in index, example.name


def tiny_project(tmp_path, body):
    """A one-page project with the site's reference rules (nitpicky, numpydoc, the API
    reference's resolver) around `body`."""
    source = tmp_path / "source"
    source.mkdir()
    (source / "conf.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(DOCS / "_ext")!r})
        extensions = ["sphinx.ext.autodoc", "numpydoc", "api_pages"]
        nitpicky = True
        exclude_patterns = ["api"]
    """))
    (source / "index.rst").write_text("Page\n====\n\n" + textwrap.dedent(body))
    return source


@pytest.mark.parametrize("body, message", [
    (":func:`seqattn.no_such_function`\n", "seqattn.no_such_function"),
    (".. currentmodule:: seqattn.adapters\n\n:class:`NoSuchAdapter`\n", "NoSuchAdapter"),
    ("Tokens (B, *window sizes) per sample.\n", "Inline emphasis"),
])
def test_a_broken_reference_or_markup_fails_the_build(tmp_path, body, message):
    code, output = sphinx_build(tiny_project(tmp_path, body), tmp_path)
    assert code != 0 and message in output, output[-3000:]


def test_references_to_reexported_and_private_names_resolve(tmp_path):
    """``Batch`` written inside seqattn.adapters reaches the object seqattn.data documents
    (here, with no API pages, it exists and renders as code); a private helper that exists in
    the code renders as code instead of failing."""
    body = """
        .. currentmodule:: seqattn.adapters

        :class:`Batch`, :func:`seqattn.ops.checks.expect_shape`
        """
    code, output = sphinx_build(tiny_project(tmp_path, body), tmp_path)
    assert code == 0, output[-3000:]


def test_a_layer_page_shows_its_constructor_signature():
    """Module.__new__ takes (*args, **kwargs); the page must show Linear's own arguments."""
    import seqattn.nn as nn

    signature, _ = api_pages.constructor_signature(None, "class", "seqattn.nn.Linear",
                                                   nn.Linear, None, "(*args, **kwargs)", None)
    assert signature == "(in_features, out_features, bias=True, dtype=numpy.float32, seed=None)"
    assert api_pages.constructor_signature(None, "class", "x", nn.Linear, None, "(a)", None) \
        is None
