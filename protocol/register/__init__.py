"""The name server's read of a REGISTER_BROKER body: lean (only what the registry keeps), in
steps of bounded work, and exactly as a full decode of every topic config reads, errors
included (the tests hold it against such a decode, a slow reference kept with them).

================  ===================================================================
module            holds
================  ===================================================================
``read``          the entry (:func:`~read.register_body_steps`): a body, plain or
                  compressed, to a table; the inflate, a compressed body's parts, and
                  the cache of what reads found (chunks, large bodies' tables)
``plain``         a plain body's JSON, fast (msgspec, chunk by chunk) or general, and
                  the sink of chunks and the per-topic reader both forms share
``table``         what a read yields (the table of shared specs, its chunks) and the
                  bounds it reads under
``identity``      what makes two bodies the same: the CRC-32, the digest, the cut
                  around the data version
``steps``         work in steps, and taking a stepped piece of work whole
================  ===================================================================
"""
