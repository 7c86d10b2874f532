"""mamba."""
