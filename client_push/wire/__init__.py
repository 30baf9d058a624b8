"""Wire: remoting frames over TCP or TLS, the link to the chosen name server (reconnect,
backoff, GoAway) and the choice of name server. Imports no other room of ``client_push``.
"""
