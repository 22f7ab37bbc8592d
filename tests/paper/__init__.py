"""Tests of benchlib.paper: the paper assembled from reference data and runs."""
