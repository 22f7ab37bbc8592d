"""Tests of benchlib.analysis: summaries, cross-checks, frontiers, decisions and rooflines."""
