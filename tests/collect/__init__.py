"""Tests of the collect stage."""
