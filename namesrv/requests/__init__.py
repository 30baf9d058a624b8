"""Requests: every served command declared once (``commands``), dispatched with its access
check and header to the domain handlers; large registers answered over several turns.
"""
