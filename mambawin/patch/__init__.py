"""The versioned Windows patch sets for mamba-ssm (mamba/) and causal-conv1d (causal_conv1d/):
one module per patch, ordered per package in registry."""
