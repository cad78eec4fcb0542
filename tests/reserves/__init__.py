"""Tests of the proof of reserves."""
