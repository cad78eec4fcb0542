"""Sweeps, gas top-ups, cold transfers and refill requests: the movements between our own
addresses (DESIGN.md section 6a), each with its own state machine and history, all sent through
the shared outgoing mechanism (``outgoing``)."""
