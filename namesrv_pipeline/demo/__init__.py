"""``namesrv-pipeline demo``: a name server, broker stand-ins and route clients on loopback, a
recorded journal and telemetry, and the pipeline's report of them. Needs nothing but Java (for
Spark)."""
