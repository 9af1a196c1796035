"""Small structure Datasets for the molecule tests (tests/*/test_molecule*.py)."""
import numpy as np
import xarray as xr

from seqattn.models import MoleculeModel, MoleculeModelConfig

XYZ = ["x", "y", "z"]


def make_structures(seed=0, sizes=(3, 5, 2, 4), elements=(1, 6, 8), periodic=(), pad_at=(),
                    cell_length=6.0, charges=False):
    """Structures of the given numbers of atoms (molecule labels "m0", "m1"...), random
    elements and positions at least 0.9 A apart, energy and forces from a pair potential, and
    optionally per-atom charges. Structures listed in ``periodic`` get a cubic cell of
    ``cell_length`` (pbc on all axes); a molecule in ``pad_at`` has its padding row before
    its last atom (padding is not always at the end)."""
    rng = np.random.default_rng(seed)
    M, A = len(sizes), max(sizes) + (1 if pad_at else 0)
    z = np.zeros((M, A), np.int64)
    positions = np.full((M, A, 3), np.nan)
    for m, n in enumerate(sizes):
        slots = list(range(n))
        if m in pad_at:
            slots[-1] = n  # slot n - 1 stays padding
        points = []
        while len(points) < n:
            p = rng.uniform(0, 3.0, 3)
            if all(np.linalg.norm(p - q) > 0.9 for q in points):
                points.append(p)
        z[m, slots] = rng.choice(elements, n)
        positions[m, slots] = points
    data = {"atomic_number": (("molecule", "atom"), z),
            "positions": (("molecule", "atom", "xyz"), positions, {"units": "Angstrom"})}
    if periodic:
        cell = np.zeros((M, 3, 3))
        pbc = np.zeros((M, 3), bool)
        for m in periodic:
            cell[m], pbc[m] = np.eye(3) * cell_length, True
        data["cell"] = (("molecule", "cell_vector", "xyz"), cell)
        data["pbc"] = (("molecule", "xyz"), pbc)
    energy, forces = pair_energy_and_forces(z, positions)
    data["energy"] = (("molecule",), energy, {"units": "eV"})
    data["forces"] = (("molecule", "atom", "xyz"), forces, {"units": "eV/Angstrom"})
    if charges:
        data["charge"] = (("molecule", "atom"), np.where(z > 0, 0.1 * z - 0.5, np.nan))
    return xr.Dataset(data, coords={"molecule": [f"m{m}" for m in range(M)],
                                    "atom": np.arange(A), "xyz": XYZ})


def pair_energy_and_forces(z, positions):
    """E = sum_i 0.3 z_i + sum_{i<j} exp(-d_ij) and F = -dE/dx (non-periodic), NaN on padding."""
    real = z > 0
    r = np.nan_to_num(positions)[:, :, None] - np.nan_to_num(positions)[:, None]
    d = np.linalg.norm(r, axis=-1)
    pair = real[:, :, None] & real[:, None, :] & ~np.eye(z.shape[1], dtype=bool)
    phi = np.where(pair, np.exp(-d), 0.0)
    energy = 0.3 * np.where(real, z, 0).sum(axis=1) + phi.sum(axis=(1, 2)) / 2
    # dE/dx_i = sum_j phi'(d_ij) r_ij / d_ij with phi' = -phi
    forces = (phi / np.where(pair, d, 1.0))[..., None] * r
    forces = forces.sum(axis=2)
    return energy, np.where(real[..., None], forces, np.nan)


def small_model(num_types=2, seed=0, **overrides):
    """A float64 model whose distance tables are large enough to matter (a freshly initialised
    table is ~0.02, which would leave distances almost without effect)."""
    config = dict(num_types=num_types, structure_outputs=1, atom_outputs=1, forces=True,
                  d_model=8, nhead=2, num_layers=2, dim_feedforward=16, bins=8, r_max=3.5,
                  cutoff=3.2, dtype="float64", seed=seed)
    config.update(overrides)
    model = MoleculeModel(MoleculeModelConfig(**config))
    rng = np.random.default_rng(seed + 1)
    for name, p in model.named_parameters():
        if name.endswith("distance_bias.table"):
            p.data[...] = rng.normal(0, 1.5, p.shape)
    return model
