"""Tests of benchlib.records: the typed CSV, request rows and the results store."""
