"""Check a built documentation site the way a reader meets it.

    python docs/check_site.py docs/_build/html             # links, anchors and images
    python docs/check_site.py docs/_build/html --browser   # and screenshots in headless Chromium
    python docs/check_site.py --browser --gallery-figures  # CI: a gallery figure is required

Four pages stand for the site: the front page, a user-guide page, a gallery page (one with a
figure when the gallery outputs were built, see docs/gallery_outputs.py) and an API page. For
each, every internal link must reach a file that exists (and the anchor it names, if any), and
every image must be a file that decodes to a picture of more than one pixel. With ``--browser``
each page, and each image it shows, is also opened in headless Chromium (Debian's ``chromium``
package) and its screenshot must not be blank. The screenshots are written next to the site, in
``_screenshots/``. With ``--gallery-figures`` the gallery page must show a figure (CI's check:
the example tests left their figures for the build).
Exits with status 1 and one line per problem when anything is wrong.
"""
import argparse
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from PIL import Image, ImageStat

PAGES = ("index.html", "user_guide/vectors.html", "gallery/*.html",
         "api/generated/seqattn.nn.Linear.html")
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


class Links(HTMLParser):
    """The ids a page defines, and the links and images it points to."""

    def __init__(self):
        super().__init__()
        self.ids, self.links, self.images = set(), [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        elif tag == "link" and attrs.get("rel") == "stylesheet" and attrs.get("href"):
            self.links.append(attrs["href"])
        elif tag in ("img", "script") and attrs.get("src"):
            (self.images if tag == "img" else self.links).append(attrs["src"])


def parse(page):
    links = Links()
    links.feed(page.read_text(encoding="utf-8"))
    return links


def pick_pages(site):
    """The pages to check; for the gallery, a page with a figure if one has any."""
    pages = []
    for pattern in PAGES:
        if "*" not in pattern:
            pages.append(site / pattern)
            continue
        candidates = sorted(p for p in site.glob(pattern) if p.name != "index.html")
        with_figure = [p for p in candidates if parse(p).images]
        pages.append((with_figure or candidates or [site / "gallery/index.html"])[0])
    return pages


def local_target(page, reference):
    """(file, anchor) a reference points to inside the site, or None for external ones."""
    parts = urlsplit(reference)
    if parts.scheme or parts.netloc or reference.startswith(("mailto:", "data:")):
        return None
    path = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
    return path, parts.fragment


def check_page(page):
    problems = []
    if not page.exists():
        return [f"{page}: missing"]
    links = parse(page)
    for reference in links.links:
        target = local_target(page, reference)
        if target is None:
            continue
        path, anchor = target
        if path.is_dir():
            path = path / "index.html"
        if not path.exists():
            problems.append(f"{page}: broken link {reference}")
        elif anchor and path.suffix == ".html" and anchor not in parse(path).ids:
            problems.append(f"{page}: link {reference} names an anchor the page lacks")
    for source in links.images:
        target = local_target(page, source)
        if target is None:
            continue
        path = target[0]
        try:
            with Image.open(path) as image:
                image.load()  # decode it all: opening reads the header only
                if image.size[0] * image.size[1] <= 1:
                    problems.append(f"{page}: image {source} is empty")
        except (OSError, ValueError) as error:
            problems.append(f"{page}: image {source} does not load ({error})")
    return problems


def blank(png):
    """A screenshot with (nearly) one colour: nothing rendered."""
    with Image.open(png) as image:
        grey = image.convert("L")
        spread = ImageStat.Stat(grey).stddev[0]
        background = max(range(256), key=grey.histogram().__getitem__)
        other = sum(n for level, n in enumerate(grey.histogram()) if abs(level - background) > 16)
        return spread < 5 or other < 0.005 * grey.size[0] * grey.size[1]


def flat(png):
    """A screenshot of an image with at most two grey levels: Chromium's background and the
    flat box it draws where an image it could not decode should be. A figure drawn with
    antialiasing has many."""
    with Image.open(png) as image:
        return len(image.convert("L").getcolors(256)) <= 2


def screenshot(browser, page, out, figure=False):
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--window-size=1280,1600", f"--screenshot={out}", page.resolve().as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or not out.exists():
        return [f"{page}: chromium could not render it ({done.stderr.strip()[-300:]})"]
    if blank(out) or (figure and flat(out)):
        return [f"{page}: the screenshot {out} is blank"]
    return []


def find_browser():
    """The path of the first Chromium found on PATH, or None."""
    return next((shutil.which(name) for name in BROWSERS if shutil.which(name)), None)


def images_of(page):
    """The image files inside the site that a page shows, each once."""
    found = []
    for source in parse(page).images:
        target = local_target(page, source)
        if target is not None and target[0] not in found:
            found.append(target[0])
    return found


def browse(browser, site, pages):
    """Screenshots of each page and of each image it shows, opened in Chromium: a page that
    does not render, or a figure Chromium cannot draw (a broken-image icon, or a flat box for a
    file cut short), leaves a blank screenshot."""
    site = site.resolve()
    shots = site / "_screenshots"
    shots.mkdir(exist_ok=True)
    problems = []
    for page in pages:
        for shown in [page, *(image for image in images_of(page) if image.exists())]:
            name = shown.resolve().relative_to(site).as_posix().replace("/", "_")
            problems += screenshot(browser, shown, shots / f"{name}.png", figure=shown != page)
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", default="docs/_build/html", type=Path)
    parser.add_argument("--browser", action="store_true",
                        help="also take screenshots in headless Chromium")
    parser.add_argument("--gallery-figures", action="store_true",
                        help="fail unless a gallery page shows a figure (CI builds the site "
                             "after the example tests left theirs)")
    args = parser.parse_args(argv)
    pages = pick_pages(args.site)
    problems = [problem for page in pages for problem in check_page(page)]
    if args.gallery_figures and not parse(pages[2]).images:
        problems.append(f"{pages[2]}: no gallery page shows a figure "
                        f"(docs/_gallery_outputs holds none)")
    if args.browser:
        browser = find_browser()
        if browser is None:
            problems.append("no Chromium found: apt-get install chromium")
        else:
            problems += browse(browser, args.site, pages)
    for problem in problems:
        print(problem)
    print(f"checked {len(pages)} pages: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
