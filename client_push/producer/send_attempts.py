"""One send's attempts, sans-I/O: the deadline, the retry budget, what each outcome means next.

Pure: every call carries the time on the caller's clock; ``SendCore`` carries the plan out on
the runtime. Events in and decisions out:

* ``next_attempt(now_ms)`` -> whether another attempt may start (budget and deadline left);
* ``begin(broker_name)`` -> an attempt to ``broker_name`` starts (True for the first one);
* ``attempt_timeout(now_ms)`` -> how long that attempt may wait for its answer;
* ``no_address(broker_name)``, ``unreachable(broker_name, addr, detail, connection=...)`` -> the
  attempt could not reach the broker; the next attempt goes elsewhere where the route allows;
* ``route_wait(addr, now_ms)`` -> before an attempt: how long to wait for the topic's next
  route first (0: none). After a connection error (the broker is down, not slow), a retry that
  would go to that same address again waits, once, for the next route at most
  ``unreachable_route_wait_ms``: a failover announces the departure and then the new master,
  and the send goes there instead of spending its attempts on a dead address;
* ``answered(broker_name, answer, code, remark, via_default=...)`` -> a ``Decision`` for a
  broker's answer other than stored: ``AVOID`` (GoAway: keep new sends off it, retry
  elsewhere), ``RETRY`` (after ``delay_ms``, isolating the broker as failed), ``REFUSE`` (the
  message itself is wrong: raise), ``STOP`` (give up: raise ``failure()``). A send that
  went through the default topic's route (``via_default``: auto-creation) and was answered
  TOPIC_NOT_EXIST or NO_PERMISSION is retried on another broker as upstream's;
  its error says the broker did not create the topic and what a broker must allow;
* ``failure(uniq_key, topic)`` -> the message of the error a send that ran out raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from client_push.producer.auto_create import AutoCreateTopic, refusal
from client_push.producer.config import ProducerConfig
from client_push.producer.send_answer import Answer


class Step(Enum):
    AVOID = "avoid"
    RETRY = "retry"
    REFUSE = "refuse"
    STOP = "stop"


@dataclass(frozen=True, slots=True)
class Decision:
    step: Step
    delay_ms: int = 0
    """Wait this long before the next attempt (a busy broker's backoff)."""


class SendAttempts:
    def __init__(self, config: ProducerConfig, timeout_ms: int, now_ms: int) -> None:
        self.config = config
        self.deadline_ms = now_ms + timeout_ms
        self.attempts = 0
        """Attempts made (sent, or given up before sending for want of an address)."""
        self.last_broker: str | None = None
        self.last_error = "no attempt made"
        self.last_code: int | None = None
        self._busy_answers = 0
        self._dead_addr: str | None = None

    def time_left(self, now_ms: int) -> int:
        return self.deadline_ms - now_ms

    def next_attempt(self, now_ms: int) -> bool:
        return self.attempts <= self.config.retries and self.time_left(now_ms) > 0

    def begin(self, broker_name: str) -> bool:
        self.attempts += 1
        self.last_broker = broker_name
        return self.attempts == 1

    def attempt_timeout(self, now_ms: int) -> int:
        """The attempt's share, never past the deadline (the selection may have waited)."""
        return min(max(1, self.time_left(now_ms)), self.config.attempt_timeout())

    def no_address(self, broker_name: str) -> None:
        self.last_error = f"broker {broker_name} has no master address in the route"

    def unreachable(
        self, broker_name: str, addr: str, detail: str, *, connection: bool = False
    ) -> None:
        """``connection``: no connection (refused, lost), rather than no answer in time."""
        self.last_error = f"broker {broker_name} ({addr}): {detail}"
        self._dead_addr = addr if connection else None

    def route_wait(self, addr: str, now_ms: int) -> int:
        if addr != self._dead_addr:
            return 0
        self._dead_addr = None
        return max(0, min(self.config.unreachable_route_wait_ms, self.time_left(now_ms)))

    def answered(
        self,
        broker_name: str,
        answer: Answer,
        code: int,
        remark: str | None,
        *,
        via_default: tuple[str, AutoCreateTopic] | None = None,
    ) -> Decision:
        """``via_default``: (topic, auto-creation settings) when the send used the default
        topic's route."""
        cfg = self.config
        refused = None if via_default is None else refusal(broker_name, *via_default, code, remark)
        self.last_error = refused or f"broker {broker_name} answered code {code}: {remark}"
        self.last_code = code
        if answer is Answer.GO_AWAY:
            return Decision(Step.AVOID)
        if answer is Answer.BUSY:
            if not cfg.retry_on_busy:
                return Decision(Step.STOP)
            delay = min(cfg.busy_backoff_max_ms, cfg.busy_backoff_ms * 2**self._busy_answers)
            self._busy_answers += 1
            return Decision(Step.RETRY, delay if self.attempts <= cfg.retries else 0)
        if answer is Answer.RETRY:
            return Decision(Step.RETRY)
        return Decision(Step.REFUSE)

    def failure(self, uniq_key: str, topic: str) -> str:
        return (
            f"message {uniq_key} to {topic} not sent after {self.attempts} attempts: "
            f"{self.last_error}"
        )
