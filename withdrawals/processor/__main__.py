"""``python -m withdrawals.processor CHAIN [--interval-s S]``: the processor loop of one chain
(``withdrawals.processor.main``), its log lines as JSON on stderr (``config.logging``)."""

from config.logging import setup_logging
from withdrawals.processor import main

setup_logging()
main()
