"""Request handlers, one module per domain.

Each class here serves the commands ``namesrv.requests.commands`` declares with its methods.
A handler is called as ``handler(conn, request, header)``: ``header`` is the request header
decoded from the type its command declares (None when it declares none), after the access
check. It returns the response, or a ``PendingResponse``, and raises ``ProtocolError`` to
refuse: the refusal is answered with that error's code and remark.
"""
