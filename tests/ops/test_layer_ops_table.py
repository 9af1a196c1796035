"""Every op in the table of tests/helpers/op_cases.py: reference, finite differences, float32 accuracy,
the CUDA kernels (under the simulator without a GPU) against the CPU ones, the references
against torch (where installed); and that the table leaves no op of ``seqattn.ops`` out."""
import pytest

from op_cases import CASES
from ops_checks import (check_backward, check_cuda_matches_cpu, check_differentiable,
                        check_float32, check_forward, check_reference_matches_torch, launchers,
                        ops_called, public_ops)
from seqattn.backend import kernels_for


def _name(case):
    return f"{case.family}-{case.name}"


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_forward_matches_reference(case):
    check_forward(case)


@pytest.mark.parametrize("case", [c for c in CASES if c.backward], ids=_name)
def test_backward_matches_finite_differences(case):
    check_backward(case)


@pytest.mark.parametrize("case", [c for c in CASES if c.differentiable], ids=_name)
def test_recorded_op_matches_its_backward(case):
    check_differentiable(case)


def test_every_op_with_a_backward_has_its_recorded_form():
    """A layer op that has a backward but no seqattn.autodiff form could not be used by a model
    that defines forward only."""
    without = [c.name for c in CASES if c.backward and not c.differentiable
               and c.family not in ("losses", "kv_cache", "optimizers", "reductions")]
    assert not without, f"ops with a backward but no recorded form: {without}"


@pytest.mark.parametrize("case", [c for c in CASES if c.float_inputs], ids=_name)
def test_float32_accuracy(case):
    check_float32(case)


# The simulator runs dropout's hash in NumPy scalars, which warn on its intended 64-bit wraparound.
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("case", CASES, ids=_name)
def test_cuda_matches_cpu(case):
    check_cuda_matches_cpu(case)


@pytest.mark.parametrize("case", [c for c in CASES if c.torch_reference], ids=_name)
def test_reference_matches_torch(case):
    check_reference_matches_torch(case, pytest.importorskip("torch"))


# the attention ops run the cases of their own table, tests/helpers/attention_cases.py (the
# packed projection's in tests/ops/test_packed_attention.py)
ATTENTION_MODULES = ("seqattn.ops.attention", "seqattn.ops.packed_attention")


def test_every_op_is_in_the_table():
    attention = {n for n, f in public_ops().items() if f.__module__ in ATTENTION_MODULES}
    missing = set(public_ops()) - attention - ops_called(CASES)
    assert not missing, f"ops without a case in tests/helpers/op_cases.py: {sorted(missing)}"


@pytest.mark.parametrize("family", sorted({c.family for c in CASES}))
def test_cuda_kernels_offer_every_cpu_launcher(family):
    """The ops call kernels_for(device, family).<launcher> on either device, so each CPU launcher
    needs a CUDA twin with the same parameters (CUDA modules may hold device-only helpers too)."""
    cpu, cuda = launchers(kernels_for("cpu", family)), launchers(kernels_for("cuda", family))
    assert cpu, f"no launchers found in seqattn.kernels.cpu.{family}"
    assert {name: cuda.get(name) for name in cpu} == cpu
