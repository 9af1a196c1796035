"""The pictures of "Everything is a vector": how each kind of data becomes tokens.

Drawn by matplotlib at build time (the ``plot`` directive in docs/user_guide/vectors.md calls
these), from made-up data, so they need nothing but NumPy and matplotlib.
"""
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

HIGHLIGHT = "#d1495b"
SHADE = "#edae49"


def grid_patches(ax):
    """A field on an 8 x 12 grid cut into 4 x 4 patches: each patch is one token."""
    lat, lon = np.meshgrid(np.linspace(-1, 1, 8), np.linspace(0, 2 * np.pi, 12), indexing="ij")
    field = np.cos(lon) * np.exp(-lat ** 2) + 0.3 * np.sin(3 * lon + 2 * lat)
    ax.imshow(field, cmap="viridis", origin="lower")
    for i in range(0, 8, 4):
        for j in range(0, 12, 4):
            edge = HIGHLIGHT if (i, j) == (4, 4) else "white"
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 4, 4, fill=False, lw=2.5, ec=edge))
    ax.set(title="a grid: 4 x 4 patches", xlabel="lon", ylabel="lat", xticks=[], yticks=[])
    ax.text(5.5, 5.5, "one token:\n16 values\nper variable", color="white", ha="center",
            va="center", fontsize=8, fontweight="bold")


def audio_frames(ax):
    """A recording cut into 25 ms frames every 10 ms: each frame is one token."""
    t = np.linspace(0, 0.1, 800)
    rng = np.random.default_rng(0)
    wave = np.sin(2 * np.pi * 180 * t) * np.exp(-((t - 0.05) / 0.03) ** 2)
    ax.plot(t * 1000, wave + 0.05 * rng.standard_normal(t.size), lw=0.7, color="0.2")
    for k, start in enumerate(np.arange(0, 0.076, 0.01)):
        color = HIGHLIGHT if k == 3 else SHADE
        ax.axvspan(start * 1000, (start + 0.025) * 1000, ymin=0.05 + 0.1 * (k % 2),
                   ymax=0.15 + 0.1 * (k % 2), color=color, alpha=0.8)
    ax.set(title="audio: 25 ms frames every 10 ms", xlabel="time (ms)", yticks=[])
    ax.text(50, 1.05, "one token: the frame's 40 log-mel energies", ha="center", fontsize=8)
    ax.set_ylim(-1.2, 1.3)


def dna_kmers(ax):
    """A DNA sequence read as overlapping 3-mers: each k-mer is one token (an id)."""
    sequence = "ACGTTGCAGT"
    for i, base in enumerate(sequence):
        ax.text(i, 1, base, ha="center", va="center", fontsize=13, family="monospace")
    for k in range(4):
        color = HIGHLIGHT if k == 2 else SHADE
        ax.add_patch(Rectangle((k - 0.4, 0.55 - 0.28 * k), 2.8, 0.22, color=color, alpha=0.8))
        ax.text(k + 1, 0.66 - 0.28 * k, sequence[k:k + 3], ha="center", va="center",
                fontsize=8, family="monospace")
    ax.text(4.5, -0.75, "k = 3, stride 1: one token per 3-mer,\nits id an index among 4 ** 3",
            fontsize=8, ha="center")
    ax.set(title="DNA: overlapping k-mers", xlim=(-0.7, 9.7), ylim=(-1.1, 1.4))
    ax.axis("off")


def molecule_atoms(ax):
    """A small molecule: each atom is a token; distances enter attention, not the tokens."""
    atoms = {"C1": (0, 0), "C2": (1.5, 0.2), "O": (2.3, 1.3), "H1": (-0.5, 0.9),
             "H2": (-0.6, -0.8), "H3": (1.7, -0.9), "H4": (3.1, 1.1)}
    colours = {"C": "0.3", "O": HIGHLIGHT, "H": "0.85"}
    bonds = [("C1", "C2"), ("C2", "O"), ("C1", "H1"), ("C1", "H2"), ("C2", "H3"), ("O", "H4")]
    for a, b in bonds:
        (x0, y0), (x1, y1) = atoms[a], atoms[b]
        ax.plot([x0, x1], [y0, y1], color="0.5", lw=2, zorder=1)
    for name in ("C1", "H1", "H3"):
        (x0, y0), (x1, y1) = atoms["O"], atoms[name]
        ax.plot([x0, x1], [y0, y1], color=SHADE, ls="--", lw=1, zorder=0)
        ax.text((x0 + x1) / 2, (y0 + y1) / 2, "d", color="0.35", fontsize=8)
    for name, (x, y) in atoms.items():
        ax.scatter(x, y, s=520, color=colours[name[0]], edgecolor="black", zorder=2)
        ax.text(x, y, name[0], ha="center", va="center", zorder=3, fontsize=9,
                color="white" if name[0] != "H" else "black")
    ax.text(1.3, -1.55, "token: the element, one-hot\nattention: + f(d) per head",
            ha="center", fontsize=8)
    ax.set(title="a molecule: one token per atom", xlim=(-1.2, 3.7), ylim=(-2, 1.9))
    ax.set_aspect("equal")
    ax.axis("off")


def graph_hops(ax):
    """A graph: each node is a token; the hop distance to the others is a pair code."""
    rng = np.random.default_rng(3)
    n = 12
    angle = np.linspace(0, 2 * np.pi, n, endpoint=False)
    xy = np.c_[np.cos(angle), np.sin(angle)] * (1 + 0.15 * rng.standard_normal((n, 1)))
    edges = [(i, (i + 1) % n) for i in range(n)] + [(0, 5), (2, 8), (3, 10), (6, 9)]
    hops = np.full(n, n)
    hops[0], frontier = 0, [0]
    while frontier:
        nxt = []
        for u in frontier:
            for a, b in edges:
                for x, y in ((a, b), (b, a)):
                    if x == u and hops[y] > hops[u] + 1:
                        hops[y] = hops[u] + 1
                        nxt.append(y)
        frontier = nxt
    for a, b in edges:
        ax.plot(*xy[[a, b]].T, color="0.6", lw=1.2, zorder=1)
    ax.scatter(*xy.T, c=hops, cmap="YlOrRd_r", s=330, edgecolor="black", zorder=2)
    for i, (x, y) in enumerate(xy):
        ax.text(x, y, str(hops[i]), ha="center", va="center", fontsize=8, zorder=3,
                color="white" if hops[i] == 0 else "black")
    ax.set(title="a graph: one token per node", xlim=(-1.6, 1.6), ylim=(-1.75, 1.45))
    ax.text(0, -1.62, "numbers: hops from node 0, a pair code", ha="center", fontsize=8)
    ax.set_aspect("equal")
    ax.axis("off")


def batch_summary(ax):
    """What every adapter's batch holds, whatever the domain."""
    lines = ["every domain, the same batch:", "",
             "tokens            (B, N, F)", "key_padding_mask  (B, N)",
             "coords            name -> (B, N)", "targets           per token or sample",
             "structure         positions, pair codes", "placement         where tokens go back"]
    for i, line in enumerate(lines):
        ax.text(0.02, 0.92 - 0.11 * i, line, family="monospace", fontsize=9,
                fontweight="bold" if i == 0 else "normal", transform=ax.transAxes)
    ax.axis("off")


def all_domains():
    """The five domains and the batch they all become, in two rows."""
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.6))
    panels = (grid_patches, audio_frames, dna_kmers, molecule_atoms, graph_hops, batch_summary)
    for draw, ax in zip(panels, axes.flat):
        draw(ax)
    fig.tight_layout()
    return fig
