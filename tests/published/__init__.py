"""Tests of benchlib.published: the seeds' reference data, its transcription and the rebuilt tables."""
