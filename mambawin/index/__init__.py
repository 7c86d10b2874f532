"""A static package index (PEP 503/691) of wheels, one per CUDA variant, with a provenance page."""
