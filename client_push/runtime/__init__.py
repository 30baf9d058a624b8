"""What the client needs from an event loop, declared once (``interface``), and one adapter per
loop: ``twisted_loop`` (the reactor, Deferreds) and ``asyncio_loop`` (asyncio and uvloop)."""
