"""Numerical kernels the calibrators and metrics share: PAV, pooling of tied scores, Newton on logistic likelihoods, the knot lookup (and its optional C kernel)."""
