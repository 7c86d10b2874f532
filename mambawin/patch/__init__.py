"""The versioned Windows patch set for upstream mamba: one module per patch, ordered in registry."""
