"""Sphinx configuration of seqattn's documentation site.

Build it (and see every warning as an error) with::

    python -m sphinx -W -b html docs docs/_build/html

The build executes no example: the gallery pages (``docs/_ext/example_gallery.py``) show each
example's docstring and code, and the printed tables and figures that
``python docs/gallery_outputs.py`` saved from the examples' quick runs, where present.
"""
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS.parent))

import seqattn  # noqa: E402  (after the path is set, so the checkout's seqattn is documented)

project = "seqattn"
author = "the seqattn developers"
copyright = "the seqattn developers"
release = seqattn.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "matplotlib.sphinxext.plot_directive",
    "api_pages",
    "example_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_gallery_outputs", "_generated", "DESIGN.md", "PERFORMANCE.md"]
templates_path = ["_templates"]

# Every cross-reference must resolve: a reference to a name that does not exist is an error
# under -W (the test in tests/docs/test_docs_build.py builds with -W).
nitpicky = True
# Types in prose and signatures that are not objects of any documented project.
# Without intersphinx (below), classes of Python and NumPy are not link targets.
nitpick_ignore_regex = [
    ("py:class", r"(numpy\.)?ndarray|[A-Z][A-Za-z]*(Error|Exception|Warning)|object|dict|list"),
]

# API reference: a page per public name, generated from the docstrings at build time
# (docs/api/generated is not kept in git).
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"
autoclass_content = "class"
# numpydoc renders the docstrings' Parameters / Returns sections; class members are listed by
# the autosummary templates (docs/_templates/autosummary), not a second time by numpydoc.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# numpydoc's checks, for the names whose docstrings are written in numpydoc form so far (the
# layers of seqattn.nn and seqattn.nn.positional, every function of seqattn.ops, the
# baselines, seqattn.evaluate, seqattn.save and seqattn.load, seqattn.graphs, the names of
# seqattn.train, seqattn.models, seqattn.readers, seqattn.adapters, seqattn.data and
# seqattn.autodiff listed below, seqattn.follow_machine_load): every parameter
# documented, none documented that does not exist, each with a description. Extend the
# pattern below as more of the API gains numpydoc docstrings.
numpydoc_validation_checks = {"PR01", "PR02", "PR07", "PR10"}
NUMPYDOC_FORM = (r"(seqattn\.nn\.[A-Z]\w*|seqattn\.nn\.positional\.\w+"
                 r"|seqattn\.(evaluate|save|load|confusion_figure)"
                 r"|seqattn\.baselines\.\w+|seqattn\.graphs\.\w+"
                 r"|seqattn\.train\.(MSELoss|MAELoss|HuberLoss|BCEWithLogitsLoss"
                 r"|LatitudeWeightedMSELoss|CrossEntropyLoss|SGD|Adam|AdamW|EarlyStopping"
                 r"|ArrayBatches|IterableBatches|TrainingBatch|DataParallel|EnergyForceLoss"
                 r"|FitState|NonFiniteLossError|evaluate|fit|PropertyLoss|StepDecay"
                 r"|WarmupCosine|warmup_and_decay|has_checkpoint|load_checkpoint"
                 r"|save_checkpoint)"
                 r"|seqattn\.train\.(clip_factor|global_grad_norm)"
                 r"|seqattn\.models\.(\w*Pooling|generate|rollout|EncoderConfig|Seq2SeqConfig"
                 r"|SequenceEncoder|Seq2SeqModel|GraphModel|GraphModelConfig|MoleculeModel"
                 r"|MoleculeModelConfig|SequenceModel|SequenceModelConfig|TokenModel"
                 r"|TokenModelConfig|StrandSymmetric|build)"
                 r"|seqattn\.readers\.(FastaRecord|from_faidx|open_fasta|read_fasta|from_ase"
                 r"|read_structures|from_networkx|graph_dataset|from_rdkit|from_smiles"
                 r"|read_sdf|read_smiles)"
                 r"|seqattn\.ops\.([a-z_]+|DistanceBias|PairBias|AttentionGradients"
                 r"|DistanceBiasGradients|PairBiasGradients)"
                 r"|seqattn\.(adapters|data)\.(Batch|BatchIterator|Normalizer|Placement|PutBack"
                 r"|Stitcher|Template)"
                 r"|seqattn\.adapters\.(ForecastBatches|ForecastWindows|GraphAdapter|GraphBatches"
                 r"|GridAdapter|LogMel|MoleculeAdapter|MoleculeBatches|SignalAdapter"
                 r"|TargetPutBack)"
                 r"|seqattn\.readers\.(from_dataarray|to_strings|complexes_from_atoms"
                 r"|read_complex|read_docked_complexes)"
                 r"|seqattn\.models\.(ComplexModel|ComplexModelConfig|ComplexStructure)"
                 r"|seqattn\.autodiff\.(Parameter|add|additive_scores|as_tensor|attention|concat"
                 r"|divide|embedding|first_token|layer_norm|linear|masked_mean|merge_heads"
                 r"|multiply|prepend_token|reduce_mean|reduce_sum|reshape|rms_norm|rope"
                 r"|split_heads|stack|subtract|swiglu|take|unwrap)"
                 r"|seqattn\.follow_machine_load)$")
numpydoc_validation_exclude = {rf"^(?!{NUMPYDOC_FORM})", r"^seqattn\.nn\.Module$"}

# No intersphinx: the build runs offline (CI and the test have no network), so links to NumPy,
# xarray and dask documentation are written as plain URLs where a page needs them.

# Pictures drawn at build time (docs/_ext/vector_pictures.py): the figure only, as a PNG.
plot_include_source = False
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 100)]

myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

html_theme = "pydata_sphinx_theme"
html_title = f"seqattn {release}"
html_static_path = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 7,
}
html_show_sourcelink = False
