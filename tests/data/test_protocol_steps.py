"""protocol.Batches.steps: a rank's share of a data-parallel epoch, the same batches as the
whole epoch cut among the ranks, with only that rank's batches collated."""
import pytest

from seqattn.data.protocol import Batches
from seqattn.train.distributed import rank_share


class Counted(Batches):
    """Batches whose 'batch' is the tuple of its sample indices; counts collations."""

    def __init__(self, n_samples, **options):
        super().__init__(**options)
        self.n_samples = n_samples
        self.collated = 0

    def collate(self, indices):
        self.collated += 1
        return tuple(int(i) for i in indices)


@pytest.mark.parametrize("n_samples, batch_size, drop_last", [(10, 3, False), (10, 3, True),
                                                              (7, 2, False), (2, 5, False)])
def test_a_ranks_steps_are_its_share_of_the_epoch_and_only_those_are_read(n_samples, batch_size,
                                                                           drop_last):
    options = dict(batch_size=batch_size, shuffle=True, seed=3, drop_last=drop_last)
    whole = list(Counted(n_samples, **options).epoch(2))
    shares = []
    for rank in range(3):
        batches = Counted(n_samples, **options)
        steps = list(batches.steps(2, rank, 3))
        assert steps == list(rank_share(whole, rank, 3))
        assert batches.collated == sum(step is not None for step in steps)
        shares.append(steps)
    assert len({len(s) for s in shares}) == 1
    assert sorted(b for s in shares for b in s if b is not None) == sorted(whole)
    if not drop_last:
        assert sorted(i for b in whole for i in b) == list(range(n_samples))
