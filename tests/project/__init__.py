"""Tests of the project around the package: code layout, packaging, bench scripts."""
