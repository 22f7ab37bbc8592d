"""Tests of benchlib.scoring: checkers and the echo rule."""
