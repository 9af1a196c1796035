"""Modules that moved in 0.2 (CHANGELOG.md): importing an old path for one release raises an
error that names the new one, rather than a bare ModuleNotFoundError."""
import importlib.abc
import sys

MOVED = {
    **{f"seqattn.adapters.{name}": f"seqattn.data.{name}"
       for name in ("batch", "batching", "blend", "checks", "coords", "model_call", "normalize",
                    "persistence", "stitch")},
    "seqattn.adapters.rdkit_molecules": "seqattn.readers.rdkit_molecules",
    "seqattn.graphs.datasets": "seqattn.readers.graphs",
    **{f"seqattn.kernels.cpu.{name}": f"seqattn.kernels.cpu.gemm.{name}"
       for name in ("amx_tiles", "bf16x3_gemm", "blas_gemm", "blas_library", "packed_gemm",
                    "register_gemm", "tile_linear")},
}


class MovedModuleError(ModuleNotFoundError):
    pass


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            raise MovedModuleError(f"{fullname} moved to {MOVED[fullname]} in seqattn 0.2; "
                                   f"import it from there (see CHANGELOG.md)", name=fullname)
        return None


def install():
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
