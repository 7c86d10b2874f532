"""What mambawin keeps on disk: its cache, its record of what it made, atomic writes, locks, and
the one way it deletes or changes a mode (only what its own record says it made)."""
