"""The CPU matrix-product engines the kernels call: BLAS (which library, loaded once), register
blocks written in LLVM IR (AVX-512 and AVX2), packed panels, and AMX tiles (bf16x3, at float32
accuracy) where the CPU has them."""
