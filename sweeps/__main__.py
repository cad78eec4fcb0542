"""``python -m sweeps CHAIN``: the sweeper loop of one chain (``sweeps.runner.main``)."""

from sweeps.runner import main

main()
