"""The tests: one folder per benchlib layer (mirroring the package), fakes/ for stand-ins, integration/ for real servers."""
