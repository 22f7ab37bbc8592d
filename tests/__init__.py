"""The tests: one folder per benchlib layer, mirroring the package; fakes/ holds stand-ins, integration/ real
servers."""
