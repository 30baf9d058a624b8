"""Routes: the held topic routes kept fresh by push, with polling as the safety net.

``PushSession`` and ``Subscriptions`` (sans-I/O) decide the push contract; ``PushRunner`` is
their glue over the runtime; ``RouteClientCore`` is the client's face.
"""
