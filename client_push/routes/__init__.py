"""Routes: the held topic routes kept fresh by push, with polling as the safety net.

``PushSession`` (sans-I/O) decides the push contract; ``RouteClient`` is its Twisted glue.
"""
