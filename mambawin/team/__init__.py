"""Team scale: a spec of wheels, its matrix of cells, and a runner that builds them."""
