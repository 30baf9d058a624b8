"""The name server's read of a REGISTER_BROKER body: lean (only what the registry keeps), in
steps of bounded work, and exactly as a full decode of every topic config reads, errors
included (the tests hold it against such a decode, a slow reference kept with them).

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
``identity``           a body's CRC-32 checked, and its digest: what makes two bodies the same
=====================  ===============================================================
"""
