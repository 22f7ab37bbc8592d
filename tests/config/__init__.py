"""Tests of benchlib.config: params, task files and their media."""
