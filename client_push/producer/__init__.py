"""Producer: sends messages to brokers, choosing queues from the held routes and the fault table,
probing and connecting to brokers. Builds on ``routes`` and ``wire``.
"""
