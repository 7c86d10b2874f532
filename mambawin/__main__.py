"""`python -m mambawin ...`."""

from mambawin.cli import main

main()
