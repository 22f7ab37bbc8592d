"""Tests of benchlib.views: the notebooks' evidence and the request explorer."""
