"""Cross-build: a Windows wheel of a stable-ABI tree, built on Linux with the Windows compilers
under wine."""
