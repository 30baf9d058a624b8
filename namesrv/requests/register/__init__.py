"""REGISTER_BROKER's wing: a broker's register from its frame to its answer.

===============  ====================================================================
module           holds
===============  ====================================================================
``entry``        the one entry (``Registers.register_broker``): a register taken in,
                 answered now or pending, stepped, refused; in order per address
``stages``       the stage table (checksum, classify, read, validate, totals, apply,
                 answer), each stage a small function or generator
``validation``   what a broker may register: names, queue counts, perms, addresses
``turns``        pending registers read and applied one slice per reactor turn
===============  ====================================================================

The body's bytes are read in :mod:`protocol.register`; the registry applies the register
(``namesrv.routes.registration``, its large tables in slices by ``register_jobs``).
"""
