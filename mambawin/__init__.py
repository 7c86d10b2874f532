"""mambawin: working mamba-ssm wheels on Windows."""

__version__ = "0.2.0"
