"""Shared runtime pieces: settings, the database engine, the unit of work, the root error, and
the sealing of secrets at rest (``encryption``: the key from the environment, never the
database).

Every domain package imports from here and nothing here imports a domain package. Settings come
from environment variables (``CUSTODY_*``) and an optional TOML file; with no database URL the
engine starts an embedded PostgreSQL (``pgserver``) under a data directory and reuses it.
"""
