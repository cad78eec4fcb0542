"""``python -m sweeps CHAIN``: the sweeper loop of one chain (``sweeps.runner.main``), its log
lines as JSON on stderr (``config.logging``)."""

from config.logging import setup_logging
from sweeps.runner import main

setup_logging()
main()
