"""Offline analysis of the name server's event journal and the clients' route telemetry.

A PySpark job: it runs in local mode by default and unchanged on a Spark cluster
(``spark-submit``). See ``docs/pipeline.md``.
"""
