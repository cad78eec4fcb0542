"""HTTP routes, one module per area; ``api.app.create_app`` includes their routers.

``deps`` holds what every route shares: the application context and the unit-of-work
dependency. This package imports no router itself (``api.app`` does), so that ``api.auth`` can
use ``deps`` without an import cycle.
"""
