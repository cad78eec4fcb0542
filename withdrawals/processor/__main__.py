"""``python -m withdrawals.processor CHAIN [--interval-s S]``: the processor loop of one chain
(``withdrawals.processor.main``)."""

from withdrawals.processor import main

main()
