"""The MPS kernel table of the installed torch: which aten ops have an MPS kernel
(``native_functions.yaml``), which fall back to the CPU, and the backend tables beside it.

Named for the kernels, not "ops": the probe's op accounting (``probe/ops.py``), the
session's op figures and the analyzers' op facts are other things."""
