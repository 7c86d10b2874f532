"""The setup.py patches both packages need: each module holds the transform (anchors, rewrite)
and mamba-ssm's declaration; causal-conv1d's modules re-declare its versions and reasons."""
