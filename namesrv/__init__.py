"""A RocketMQ name server on Twisted that pushes topic-route changes to subscribed clients."""
