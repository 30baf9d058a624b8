"""The name server's read of a REGISTER_BROKER body: lean (only what the registry keeps), in
steps of bounded work, and exactly as the full decoder of :mod:`protocol.register_body` reads,
errors included.

=======================  ============================================================
module                   holds
=======================  ============================================================
``lean_read``            the entry: :func:`~lean_read.register_body_steps`, the read table, the
                         read bounds, and the general readers for bodies not in the usual form
``plain_fast``           a plain body in the usual form, decoded by msgspec a chunk at a time
``compressed_fast``      a compressed body's records in the usual form, a chunk at a time
``chunk_cache``          chunks as read, and the bounded cache of them by identity
``version_cut``          a plain body cut around its data version (a version-only change)
=======================  ============================================================
"""
