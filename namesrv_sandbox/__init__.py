"""A sandbox for trying the name server without RocketMQ: stand-in brokers, not brokers.

``namesrv_sandbox.standin`` answers what producers, admin tools and name servers ask a broker
(register, send, topic create and delete) and stores nothing; ``namesrv_sandbox.cli``
(``namesrv-sandbox``) runs some of them against a name server and lets a user stop, fail and
restart them.
"""
