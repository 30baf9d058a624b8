"""Topic names as upstream's ``TopicValidator`` accepts them: 1 to 127 characters of
``A-Z a-z 0-9 _ - % |``.

The one declaration every door a name comes through uses: the name server's registers and
subscriptions, ``namesrv-admin``'s verbs, the client's sends and the sandbox's stand-ins. A
name refused here is one a real broker would never have created.
"""

from __future__ import annotations

import re

TOPIC_NAME_MAX_LENGTH = 127
"""As upstream's ``TopicValidator.TOPIC_MAX_LENGTH``."""
TOPIC_NAME_CHARS = "A-Za-z0-9_%|-"
"""The characters upstream accepts in a topic name, as a regex character class body."""
_TOPIC_NAME = re.compile(f"[{TOPIC_NAME_CHARS}]+")


def topic_name_problem(topic: str, max_length: int = TOPIC_NAME_MAX_LENGTH) -> str | None:
    """Why ``topic`` is not a topic name (a sentence naming it), or None when it is one.

    ``max_length`` may only lower upstream's bound (a name server's
    ``registry.max_topic_name_bytes``)."""
    if not topic:
        return "topic name is empty"
    if len(topic) > max_length:
        return (
            f"topic name {topic[:max_length]!r}... is {len(topic)} characters, "
            f"longer than {max_length}"
        )
    if _TOPIC_NAME.fullmatch(topic) is None:
        return f"topic name {topic!r} has characters outside [{TOPIC_NAME_CHARS}]"
    return None


def check_topic_name(topic: str) -> str:
    """``topic`` when it is a topic name; ValueError saying why not otherwise."""
    problem = topic_name_problem(topic)
    if problem is not None:
        raise ValueError(problem)
    return topic
