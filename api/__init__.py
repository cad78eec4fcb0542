"""Composition: the command line (and later the HTTP app and the scheduler).

``api`` imports every domain package; no domain package imports ``api``.
"""
