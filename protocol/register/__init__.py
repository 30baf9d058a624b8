"""The name server's read of a REGISTER_BROKER body: lean (only what the registry keeps), in
steps of bounded work, and exactly as the full decoder of :mod:`protocol.register_body` reads,
errors included. Only the server uses it; brokers' code uses the full codec.

=====================  ===============================================================
module                 holds
=====================  ===============================================================
``lean_read``          the entry (:func:`~lean_read.register_body_steps`): which reader
                       reads a body, and the general read of compressed records
``read_table``         what a read yields (the table of shared specs, the small parts
                       checked) and the bounds it reads under
``plain_fast``         a plain body in the usual form, decoded by msgspec chunk by chunk
``plain_general``      a plain body in any other form: the C scanner, or fastjson whole
``compressed_fast``    a compressed body's records in the usual form, chunk by chunk
``chunk_cache``        chunks as read, and the bounded cache of them by identity
``version_cut``        a plain body cut around its data version (a version-only change)
=====================  ===============================================================
"""
