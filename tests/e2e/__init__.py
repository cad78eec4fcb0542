"""End-to-end tests: the engine operated through its command line and HTTP API only."""
