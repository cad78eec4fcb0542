"""Shared runtime pieces: settings, the database engine, the unit of work and the root error.

Every domain package imports from here and nothing here imports a domain package. Settings come
from environment variables (``CUSTODY_*``) and an optional TOML file; with no database URL the
engine starts an embedded PostgreSQL (``pgserver``) under a data directory and reuses it.
"""
