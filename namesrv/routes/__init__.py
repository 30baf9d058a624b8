"""Routes: upstream's RouteInfoManager tables (brokers, topics, queue data), KV config and
the encoded route bodies; reports exactly the topics whose route changed, with the cause.
"""
