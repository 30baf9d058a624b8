"""Command lines: ``python -m client_push watch`` (follow routes) and ``send`` (send messages)."""
