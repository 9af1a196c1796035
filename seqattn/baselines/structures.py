"""Structures (molecules, crystals): a linear model on element counts.

Reads ``structure.types`` (B, N), the small integer type of each atom (the molecule adapter's
element codes), and ``key_padding_mask``. The features per structure are the count of each type
seen in training and the number of atoms; a type first met after training counts only in the
number of atoms. Ridge for values, logistic regression for classes (RF-Score's element counts,
without the pair contacts).
"""
import numpy as np

from .linear import LinearBaseline


def atom_types(batch):
    if batch.structure is None or getattr(batch.structure, "types", None) is None:
        raise ValueError("ElementCounts reads atom types from batch.structure.types (the "
                         "molecule adapter's batches); this batch has none")
    types = np.asarray(batch.structure.types).astype(np.int64)
    return np.where(np.asarray(batch.key_padding_mask), -1, types)


class ElementCounts(LinearBaseline):
    """Ridge (values) or logistic regression (classes) per structure on its element counts,
    for targets per structure (N -> 1); the penalty chosen on validation. Takes no
    parameters.

    The features of a structure are the count of each atom type of ``structure.types``
    (B, N) seen in training and its number of atoms (see the module docstring).
    """

    kind = "element counts"

    def _fit(self, train, validation):
        if self.layout.per_token:
            raise ValueError("ElementCounts predicts per structure; these targets are per atom")
        return super()._fit(train, validation)

    def prepare(self, train):
        self.n_types = int(max(atom_types(b).max(initial=0) for b in train)) + 1

    def features(self, batch):
        types = atom_types(batch)
        counts = np.zeros((len(types), self.n_types + 1))
        rows, cols = np.nonzero((types >= 0) & (types < self.n_types))
        np.add.at(counts, (rows, types[rows, cols]), 1.0)
        counts[:, -1] = (types >= 0).sum(axis=1)
        return counts
