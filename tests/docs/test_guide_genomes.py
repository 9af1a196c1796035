"""The genomes page's whole path runs as the page shows it, on a small generated FASTA standing
in for the peaks file."""
import gzip

import numpy as np

from page_blocks import GUIDE, run_block
from train_tasks import one_numba_thread  # noqa: F401  (tiny shapes run faster on one thread)


def test_the_genome_walkthrough_runs_as_written(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    records = []
    for i in range(12):
        bases = rng.choice(list("ACGT"), 200)
        bases[50] = "A"  # chr1:150, the variant's reference base, in the first record
        records.append(f">chr1:{100 + 300 * i}-{300 + 300 * i}\n{''.join(bases)}\n")
    monkeypatch.chdir(tmp_path)
    with gzip.open("peaks.fa.gz", "wt") as f:
        f.write("".join(records))
    namespace = {"labels": np.array(["Oct4", "Mafk"] * 6, dtype=object),
                 "train": np.arange(12) < 8}
    run_block(GUIDE / "genomes.md", "## The whole path", namespace)
    out, ds = namespace["out"], namespace["ds"]
    assert out["factor"].dims == ("record",) and out["record"].equals(ds["record"])
    np.testing.assert_allclose(out["factor_probability"].sum("class"), 1.0, rtol=1e-5)
    assert namespace["effects"]["difference"].sizes["variant"] == 1
    assert namespace["ism"].dims == ("position", "base")
