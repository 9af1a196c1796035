"""Writes the API reference's package pages from the packages' ``__all__`` at build time.

Every name a public package exports gets an entry, so a name added to ``__all__`` is documented
without anyone editing the docs, and a name whose object cannot be imported or documented
breaks the build (with ``-W``). A name exported by several packages (``Batch`` is in
``seqattn.data`` and ``seqattn.adapters``) is documented once, under the package that defines
it, and linked from the others.

The pages go to ``docs/api/`` next to ``index.rst``; they are generated, so git ignores them.
"""
import builtins
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

from sphinx.util import logging

LOG = logging.getLogger(__name__)

# Public packages, in the order the reference lists them, with a one-line description.
PACKAGES = [
    ("seqattn", "attention itself, storage, and the calls a notebook starts from"),
    ("seqattn.adapters", "xarray data as sequences of vectors, one adapter per domain"),
    ("seqattn.data", "what every domain shares: batches, normalization, putting values back"),
    ("seqattn.readers", "files and objects of each domain's own tools as Datasets"),
    ("seqattn.graphs", "graph encodings: hop distances, degrees, Laplacian positions"),
    ("seqattn.baselines", "strong simple baselines on the inputs a model sees"),
    ("seqattn.evaluation", "a model and its baselines scored on the same samples"),
    ("seqattn.models", "task models for N -> N, N -> 1, N -> N', graphs and molecules"),
    ("seqattn.train", "losses, optimizers, schedules, the fit loop, checkpoints"),
    ("seqattn.nn", "layers with torch.nn's parameter names, forward only"),
    ("seqattn.nn.positional", "positional encodings: tables, rotary, ALiBi, calendars"),
    ("seqattn.autodiff", "the record of differentiable ops a forward pass runs"),
    ("seqattn.ops", "one differentiable operator per family, on NumPy or CUDA arrays"),
]

KINDS = (("Classes", "class"), ("Functions", "function"), ("Constants", "data"))
OUTPUT = "api"


def kind_of(obj):
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "data"


def public_names(package):
    module = importlib.import_module(package)
    names = getattr(module, "__all__", None)
    if names is None:
        raise ValueError(f"{package} has no __all__: the API reference lists what __all__ names")
    return module, [n for n in names if not n.startswith("__")]


def home_package(obj, exporters):
    """The package that documents `obj`: the deepest exporter its module lies in, else the
    first exporter."""
    where = getattr(obj, "__module__", "") or ""
    inside = [p for p in exporters if where == p or where.startswith(p + ".")]
    return max(inside, key=len) if inside else exporters[0]


def plan():
    """{package: {kind: [names documented here]}}, {package: [(name, home) linked]}."""
    exports = {}
    objects = {}
    for package, _ in PACKAGES:
        module, names = public_names(package)
        for name in names:
            try:
                obj = getattr(module, name)  # an AttributeError here is a broken __all__
            except ModuleNotFoundError as error:
                # A name that the package imports on first use, from a module not written yet
                # (seqattn.evaluate before seqattn/evaluation.py lands): said, not documented.
                LOG.info(f"api_pages: {package}.{name} is not documented: {error}")
                continue
            objects[package, name] = obj
            if inspect.ismodule(obj):
                continue
            exports.setdefault(id(obj), []).append(package)
    documented = {package: {kind: [] for _, kind in KINDS} for package, _ in PACKAGES}
    linked = {package: [] for package, _ in PACKAGES}
    submodules = {package: [] for package, _ in PACKAGES}
    for (package, name), obj in objects.items():
        if inspect.ismodule(obj):
            submodules[package].append(obj.__name__)
            continue
        home = home_package(obj, exports[id(obj)])
        if home == package:
            documented[package][kind_of(obj)].append(name)
        else:
            linked[package].append((name, home))
    return documented, linked, submodules


def modules_of(package):
    """The public modules inside `package` that no other page documents: their docstrings
    (what a domain's tokens are, how a kernel is laid out) follow the package's names."""
    module = importlib.import_module(package)
    own_pages = {p for p, _ in PACKAGES}
    found = []
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        name = f"{package}.{info.name}"
        if info.name.startswith("_") or name in own_pages:
            continue
        found.append(name)
    return sorted(found)


def page(package, summary, documented, linked, submodules):
    title = f"``{package}``"
    lines = [f".. _api-{package}:", "", title, "=" * len(title), "",
             f".. automodule:: {package}", "   :no-members:", "",
             f".. currentmodule:: {package}", ""]
    for heading, kind in KINDS:
        names = sorted(documented[kind], key=str.lower)
        if not names:
            continue
        lines += [heading, "-" * len(heading), "", ".. autosummary::",
                  "   :toctree: generated/", "   :nosignatures:", ""]
        lines += [f"   {name}" for name in names] + [""]
    if linked or submodules:
        lines += ["Also here", "---------", ""]
        for name, home in sorted(linked, key=lambda item: item[0].lower()):
            lines.append(f"* :py:obj:`~{home}.{name}`, documented under :mod:`{home}`")
        for module in submodules:
            lines.append(f"* :mod:`{module}`, a package of its own")
        lines.append("")
    modules = modules_of(package)
    names_here = {name for kind in documented.values() for name in kind}
    if modules:
        lines += ["Modules", "-------", "",
                  "What each module of the package holds, from its docstring.", ""]
        for module in modules:
            heading = f"``{module}``"
            lines += [heading, "^" * len(heading), "", f".. automodule:: {module}",
                      "   :no-members:"]
            if module.rpartition(".")[2] in names_here:
                # seqattn.ops.attention is a module and a function: the function keeps the name
                lines.append("   :no-index:")
            lines.append("")
    return "\n".join(lines)


# id(object) -> the full name it is documented under, for the reference resolver below.
DOCUMENTED = {}


def write_pages(app, config=None):
    out = Path(app.srcdir) / OUTPUT
    out.mkdir(exist_ok=True)
    documented, linked, submodules = plan()
    DOCUMENTED.clear()
    for package, kinds in documented.items():
        module = importlib.import_module(package)
        for kind, names in kinds.items():
            for name in names:
                if kind != "data":
                    DOCUMENTED[id(getattr(module, name))] = f"{package}.{name}"
    # Pages of names no package exports any more (moved or removed) would be orphans: drop them.
    current = {f"{name}.rst" for name in DOCUMENTED.values()} | {
        f"{package}.{name}.rst" for package, kinds in documented.items()
        for name in kinds["data"]}
    for stale in (out / "generated").glob("*.rst"):
        if stale.name not in current:
            stale.unlink()
    for package, summary in PACKAGES:
        text = page(package, summary, documented[package], linked[package], submodules[package])
        path = out / f"{package}.rst"
        if not path.exists() or path.read_text() != text:  # unchanged pages keep their mtime
            path.write_text(text)


def import_chain(name):
    """The objects a dotted name passes through (module, then attributes), or None when the
    name reaches nothing."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        chain = [(".".join(parts[:cut]), obj)]
        for attribute in parts[cut:]:
            if not hasattr(obj, attribute):
                return None
            obj = getattr(obj, attribute)
            chain.append((attribute, obj))
        return chain
    return None


def documented_name(chain):
    """Where the object at the end of `chain` is documented: a documented module, a documented
    object, or an attribute (a method) of one; None when it has no page."""
    last = chain[-1][1]
    if inspect.ismodule(last):
        return last.__name__, "mod"
    for depth in range(len(chain) - 1, -1, -1):
        home = DOCUMENTED.get(id(chain[depth][1]))
        if home is not None:
            rest = [attribute for attribute, _ in chain[depth + 1:]]
            return ".".join([home] + rest), "obj"
    return None, None


def resolve_reexport(app, env, node, contnode):
    """References in the docstrings name objects where they are defined or imported; this
    sends each to the page that documents it (``Batch`` inside ``seqattn.adapters``, or
    ``seqattn.data.batch.Batch``, to ``seqattn.data.Batch``; ``GridAdapter.fit`` to its method).

    A reference to something that exists in the code but has no page of its own (a module's
    private helper) is shown as plain code. A reference to a name that exists nowhere (a moved
    or renamed function) stays unresolved, and ``-W`` fails the build on it.
    """
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~").lstrip(".")
    context = node.get("py:module") or ""
    parts = context.split(".") if context else []
    klass = node.get("py:class")
    candidates = []
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if klass:
            candidates.append(f"{prefix}.{klass}.{target}")
        candidates.append(f"{prefix}.{target}")
    candidates.append(target)
    # A docstring's names are relative to the module that holds it (``GenomeBatches`` in
    # GenomeAdapter's methods), which is not the package its page documents it under.
    contexts = [".".join(parts + ([klass] if klass else [])),
                node["refdoc"].rpartition("/")[2]]
    for context_name in contexts:
        chain = import_chain(context_name) if context_name.startswith("seqattn") else None
        home = getattr(chain[-1][1], "__module__", None) if chain else None
        if home:
            candidates.append(f"{home}.{target}")
    # A name written without its package (``Structure`` in a models docstring, for
    # seqattn.nn.Structure): the one documented object of that short name, if there is one.
    head, _, rest = target.partition(".")
    homes = [full for full in DOCUMENTED.values() if full.rpartition(".")[2] == head]
    if len(homes) == 1:
        candidates.append(homes[0] + ("." + rest if rest else ""))
    exists = False
    for name in candidates:
        chain = import_chain(name)
        if chain is None:
            continue
        exists = True
        if not name.startswith("seqattn"):
            continue  # scipy.signal.stft: real, but documented elsewhere
        documented, reftype = documented_name(chain)
        if documented is None:
            continue
        found = env.get_domain("py").resolve_xref(env, node["refdoc"], app.builder, reftype,
                                                  documented, node, contnode)
        if found is not None:
            return found
    return contnode if exists else None


def documented_bases(app, name, obj, options, bases):
    """A class page lists the bases a user can look up: seqattn's documented classes and
    classes from outside seqattn, not the private helpers between them."""
    bases[:] = [base for base in bases
                if id(base) in DOCUMENTED or not base.__module__.startswith("seqattn")]


def constructor_signature(app, what, name, obj, options, signature, return_annotation):
    """A seqattn module's signature is its ``__init__``'s: ``Module.__new__`` takes
    ``(*args, **kwargs)`` (to record the arguments a saved model is rebuilt from), which
    autodoc would show for every layer instead."""
    if what != "class" or signature != "(*args, **kwargs)" or obj.__init__ is object.__init__:
        return None
    parameters = list(inspect.signature(obj.__init__).parameters.values())[1:]
    text = str(inspect.Signature(parameters))
    return re.sub(r"<class '([\w.]+)'>", r"\1", text), return_annotation


def link_module_docstring(app, what, name, obj, options, lines):
    """A class whose docstring says "see the module docstring" links to that module's section
    of the package page, where the module docstring is shown."""
    module = getattr(obj, "__module__", None)
    if what == "class" and module and any("module docstring" in line for line in lines):
        lines += ["", f".. seealso:: :mod:`{module}`, the module docstring this class refers to."]


def setup(app):
    app.connect("autodoc-process-signature", constructor_signature)
    app.connect("autodoc-process-docstring", link_module_docstring)
    app.connect("config-inited", write_pages)
    app.connect("missing-reference", resolve_reexport)
    app.connect("autodoc-process-bases", documented_bases)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
