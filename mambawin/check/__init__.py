"""Checks of a ref against another platform\x27s real compilers, without building a wheel."""
