"""Tests of the proof of reserves (the reserves package)."""
