"""What a build runs on: MSVC, CUDA and torch as typed facts, shared by doctor, build and team.

`probe` holds the probe vocabulary (`Check`, `ProbeContext`, the one way a probe runs a tool),
`cuda`, `pytorch` and `msvc` the facts of each toolchain, `winreg` the Windows registry reader.
doctor judges these facts into its report; build and team use them directly.
"""
