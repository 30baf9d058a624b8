"""The Spark half of the job: reading the journal and telemetry, the facts, their
aggregations into a summary, and the replay grid. Everything here may import pyspark;
``namesrv_pipeline.report`` never imports this package."""
