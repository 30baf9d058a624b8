"""Why a topic's route was touched; suppression rules and the journal key on it."""

from __future__ import annotations

from enum import StrEnum


class ChangeCause(StrEnum):
    BROKER_STARTUP = "broker_startup"
    """A register carrying more than one topic from a broker not currently registered."""
    REGISTER = "register"
    """A register adding or changing topics of a live broker (or a one-topic first register)."""
    UNREGISTER = "unregister"
    CHANNEL_CLOSE = "channel_close"
    EXPIRY = "expiry"
    DELETE_TOPIC = "delete_topic"
    UNLISTED = "unlisted"
    """A live master's register no longer lists a topic it held
    (``registry.delete_topic_with_broker_registration``): the broker deleted it."""
    WIPE_WRITE_PERM = "wipe_write_perm"
    ADD_WRITE_PERM = "add_write_perm"
    REGISTER_TOPIC = "register_topic"
    """REGISTER_TOPIC_IN_NAMESRV (217), the admin path that writes queue data directly."""
    ORDER_CONF = "order_conf"
    """The ORDER_TOPIC_CONFIG KV entry of a topic changed (its orderTopicConf moves)."""
