"""Numba's disk cache, kept fresh by every seqattn file a kernel's module imports.

Numba stamps a cached kernel with its own source file only. A kernel inlines its callees (and
freezes the module-level constants it reads), often from other files: after an edit of
``float32_math.py`` the kernels of ``attention.py`` that inline its exp would load from the
cache as they were. Here a kernel file's stamp is a hash of its own content and that of every
seqattn module it imports, directly or through them (read from its import statements, lazy
ones included, so the set can only be too large). An edit or an upgrade of any of them makes
Numba find the cached index stale, compile afresh and overwrite it: nothing stale is loaded,
nothing is deleted by hand. Where the cache lives (``NUMBA_CACHE_DIR``, beside the sources, or
the user-wide folder) is still Numba's choice.
"""
import functools
import hashlib
import os
import re

# "from X import names" (names possibly in parentheses over several lines) or "import X, Y".
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*)"
                     r"|import[ \t]+([^\n#]+))", re.MULTILINE)


def _module_file(path):
    """The source file of the module or package at ``path`` (no extension), or None."""
    if os.path.isfile(path + ".py"):
        return path + ".py"
    if os.path.isfile(os.path.join(path, "__init__.py")):
        return os.path.join(path, "__init__.py")
    return None


def _imported_files(source_file, package_root, package_name):
    """Files of the package's modules that ``source_file``'s import statements name."""
    with open(source_file, encoding="utf-8") as f:
        text = f.read()
    here = os.path.dirname(source_file)
    found = set()
    for origin, names, plain in _IMPORT.findall(text):
        if plain:
            targets = [(name.split(" as ")[0].strip(), ()) for name in plain.split(",")]
        else:
            names = [n.split(" as ")[0].strip() for n in names.strip("()").split(",")]
            targets = [(origin, [n for n in names if n.isidentifier()])]
        for module, members in targets:
            dots = len(module) - len(module.lstrip("."))
            if dots:
                base = here
                for _ in range(dots - 1):
                    base = os.path.dirname(base)
                parts = [p for p in module[dots:].split(".") if p]
            elif module.split(".")[0] == package_name:
                base, parts = os.path.dirname(package_root), module.split(".")
            else:
                continue
            path = os.path.join(base, *parts)
            for candidate in [path] + [os.path.join(path, m) for m in members]:
                file = _module_file(candidate)
                if file is not None and file.startswith(package_root):
                    found.add(os.path.normpath(file))
    return found


@functools.lru_cache(maxsize=None)
def dependency_files(source_file, package_root):
    """``source_file`` and every module of the package under ``package_root`` that it imports,
    directly or through the others, as a sorted tuple of paths."""
    package_name = os.path.basename(package_root)
    seen, todo = set(), [os.path.normpath(source_file)]
    while todo:
        file = todo.pop()
        if file not in seen:
            seen.add(file)
            todo.extend(_imported_files(file, package_root, package_name) - seen)
    return tuple(sorted(seen))


def _content_hash(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).digest()


@functools.lru_cache(maxsize=None)
def dependency_stamp(source_file, package_root):
    """A hash of the contents of :func:`dependency_files` (read once per process)."""
    digest = hashlib.sha256()
    for file in dependency_files(source_file, package_root):
        digest.update(os.path.relpath(file, package_root).encode())
        digest.update(_content_hash(file))
    return digest.hexdigest()


class DependencyStampLocator:
    """A Numba cache locator for the functions of one package: it finds the cache folder as
    the locators after it would, and stamps the index with :func:`dependency_stamp`."""

    package_root = None   # set by locator_for
    others = ()

    def __init__(self, inner, stamp):
        self._inner, self._stamp = inner, stamp

    @classmethod
    def from_function(cls, py_func, py_file):
        if not os.path.abspath(py_file).startswith(cls.package_root + os.sep):
            return None
        for other in cls.others:
            inner = other.from_function(py_func, py_file)
            if inner is not None:
                return cls(inner, dependency_stamp(os.path.abspath(py_file), cls.package_root))
        return None

    def ensure_cache_path(self):
        self._inner.ensure_cache_path()

    def get_cache_path(self):
        return self._inner.get_cache_path()

    def get_source_stamp(self):
        return self._stamp

    def get_disambiguator(self):
        return self._inner.get_disambiguator()

    def __getattr__(self, name):
        # Anything else Numba reads off a locator (``_py_file`` for its "cannot cache"
        # warning) is the inner locator's.
        return getattr(self._inner, name)


def install(cache_impl, package_root):
    """Put a :class:`DependencyStampLocator` for ``package_root`` first among the locators of
    Numba's ``cache_impl`` class (``numba.core.caching.CompileResultCacheImpl`` for @njit,
    numba-cuda's for @cuda.jit); once per class and package."""
    package_root = os.path.normpath(os.path.abspath(package_root))
    classes = cache_impl._locator_classes
    if any(getattr(c, "package_root", None) == package_root for c in classes):
        return
    locator = type("DependencyStampLocator", (DependencyStampLocator,),
                   dict(package_root=package_root, others=tuple(classes)))
    classes.insert(0, locator)


PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
