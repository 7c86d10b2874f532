"""doctor."""
