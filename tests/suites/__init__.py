"""Tests of benchlib.suites: the runner (resume, identity), the ladder and the load sweeps."""
