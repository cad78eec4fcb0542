"""Test helpers that are not fixtures: ``fault_proxy``, a real JSON-RPC proxy that drops
answers or requests on demand (fault injection without patching the engine)."""
