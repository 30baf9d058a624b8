"""Config values the observed behaviour argues for, each with the evidence behind it.

Pure functions of a ``Summary`` and the config the name server ran with. Every rule keeps the
current value unless the data is plentiful enough and clearly points one way; the rules and
their constants are documented in ``docs/pipeline.md``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

from namesrv.config import NamesrvConfig
from namesrv.properties import resolve_key
from namesrv_pipeline.report.summary import SPREAD_CAUSES, Distribution, Summary

MIN_SAMPLES = 20
"""Fewer notified fetches than this say nothing about the tick."""
FRAME_HEADROOM = 32
"""The output buffer should hold this many of the largest notifications seen."""
MIN_OUTPUT_BUFFER = 1 << 20
DRAIN_TARGET_MS = 10_000
"""A backlog should drain well within one poll interval of the clients (30 s)."""
RELAPSE_SHARE = 0.25
MIN_RECOVERY_RATE = 100
FLAP_EPISODES = 3
FLAP_SAMPLES = 3
"""Episodes lasting this many samples or fewer are spikes, not sustained pressure."""
MAX_SAMPLE_INTERVAL_MS = 10_000


@dataclass(frozen=True, slots=True)
class Targets:
    propagation_p99_ms: int = 1_500
    """A pushed change should reach clients within this (p99), tick wait included."""


@dataclass(frozen=True, slots=True)
class Recommendation:
    key: str
    """Dotted config key, as in docs/config.md."""
    current: int | float
    suggested: int | float
    reason: str
    optimises: str = ""
    """The figure the rule serves and the records it was computed over (degraded windows in
    or out, said so)."""
    effect: str = ""
    """What changing the value is expected to do (empty when kept)."""

    @property
    def changed(self) -> bool:
        return self.suggested != self.current


LOOSER: dict[str, int] = {
    "push.tick_interval_ms": 1,
    "push.recovery_notifications_per_second": -1,
    "pressure.sample_interval_ms": 1,
    "pressure.cpu_low_percent": -1,
    "pressure.memory_low_percent": -1,
}
"""Keys whose move in this direction (+1 up, -1 down) can lengthen propagation: a longer tick
wait, a slower drain, a later or rarer recovery."""


_OPTIMISES = {
    "server.output_buffer_bytes": "slow-subscriber skips: 32 of the largest per-connection "
    "notification seen in any tick, degraded windows and backlog drains included",
    "push.recovery_notifications_per_second": "backlog drain time without relapse: every "
    "recovery in the journal (they all follow a degraded window)",
    "pressure.sample_interval_ms": "episodes per overload (flapping): every finished degraded "
    "episode, from the transitions' samples",
    "pressure.cpu_low_percent": "episodes per overload (flapping): the CPU readings at every "
    "transition",
    "pressure.memory_low_percent": "episodes per overload (flapping): the memory readings at "
    "every transition",
}


def end_to_end(s: Summary) -> Distribution:
    """The end-to-end figure the target is held to: every client-version tied to a change,
    degraded windows included, the refetches clients spread on purpose (``SPREAD_CAUSES``)
    left out (all of them for a summary that does not split them off)."""
    if s.propagation_unspread.count:
        return s.propagation_unspread
    return s.propagation.get("all", Distribution())


END_TO_END = (
    "end-to-end p99 over client-versions, degraded windows included, without the refetches "
    "clients spread on purpose (" + ", ".join(SPREAD_CAUSES) + ")"
)


def target_missed(s: Summary, targets: Targets) -> bool:
    """Whether the end-to-end p99 (``end_to_end``) exceeds the target."""
    p99 = end_to_end(s).p99
    return p99 is not None and p99 > targets.propagation_p99_ms


def loosens(r: Recommendation) -> bool:
    direction = LOOSER.get(r.key, 0)
    return direction * (r.suggested - r.current) > 0


def recommend(summary: Summary, config: NamesrvConfig, targets: Targets) -> list[Recommendation]:
    recs = [
        _tick(summary, config, targets),
        _output_buffer(summary, config),
        _recovery_rate(summary, config),
        *_pressure(summary, config),
    ]
    recs = [r if r.optimises else replace(r, optimises=_OPTIMISES[r.key]) for r in recs]
    if not target_missed(summary, targets):
        return recs
    # While clients get changes later than the target, nothing may make them later still.
    e2e = end_to_end(summary).p99
    return [
        replace(
            r,
            suggested=r.current,
            effect="",
            reason=f"kept: the end-to-end p99 ({e2e:.0f} ms, degraded windows included) misses "
            f"the {targets.propagation_p99_ms} ms target, and {r.suggested} would lengthen "
            f"propagation ({r.reason})",
        )
        if loosens(r)
        else r
        for r in recs
    ]


def _floor10(value: float) -> int:
    return int(value // 10 * 10)


def _tick(s: Summary, cfg: NamesrvConfig, targets: Targets) -> Recommendation:
    key, tick = "push.tick_interval_ms", cfg.push.tick_interval_ms
    target = targets.propagation_p99_ms
    d = s.delivery
    e2e = end_to_end(s)
    over = (
        f"tick + delivery p99 against the {target} ms target for the {END_TO_END}; delivery "
        f"over {d.count} notified fetches, timed from the NOTIFY's emission, so time held in "
        f"degraded windows is not in it; end-to-end over {e2e.count} client-versions "
        f"(of the {s.held_changes} changes held while push was degraded, the "
        f"{s.held_reached} some client learned)"
    )
    if d.count < MIN_SAMPLES or d.p99 is None:
        return Recommendation(
            key,
            tick,
            tick,
            f"kept: {d.count} notified fetches, {MIN_SAMPLES} needed to judge",
            over,
        )
    budget = target - d.p99
    if budget < 10:
        return Recommendation(
            key,
            tick,
            tick,
            f"kept: delivery alone (notify to fetched, p99 {d.p99:.0f} ms) exceeds the "
            f"{target} ms target; a shorter tick cannot fix that (look at client fetch times "
            "and server load)",
            over,
        )
    fitting = min(1_000, _floor10(budget))
    if tick + d.p99 > target:
        return Recommendation(
            key,
            tick,
            fitting,
            f"a change waits up to one tick, then delivery p99 is {d.p99:.0f} ms: "
            f"{tick} + {d.p99:.0f} = {tick + d.p99:.0f} ms misses the {target} ms target; "
            f"{target} - {d.p99:.0f} = {target - d.p99:.0f} ms is left for the tick, "
            f"{fitting} in steps of 10 ms (at most 1000)",
            over,
            f"the tick wait falls from at most {tick} to {fitting} ms: end-to-end p99 about "
            f"{tick} - {fitting} = {tick - fitting} ms shorter",
        )
    return _tick_kept_or_raised(s, tick, fitting, target, over)


def _tick_kept_or_raised(
    s: Summary, tick: int, fitting: int, target: int, over: str
) -> Recommendation:
    """A tick that meets the target with delivery: raised when it is at most half of what
    the target allows, else kept."""
    key, d, e2e = "push.tick_interval_ms", s.delivery, end_to_end(s)
    assert d.p99 is not None
    # Raising the tick adds its growth to every change's wait: the end-to-end p99 must keep
    # the target with that added.
    headroom = None if e2e.p99 is None else _floor10(tick + target - e2e.p99)
    raised = fitting if headroom is None else min(fitting, headroom)
    if tick * 2 <= raised:
        grows = "" if e2e.p99 is None else f", to about {e2e.p99 + raised - tick:.0f} ms"
        return Recommendation(
            key,
            tick,
            raised,
            f"delivery p99 is {d.p99:.0f} ms and the end-to-end p99 "
            f"{_ms(e2e.p99)}, so a {raised} ms tick still meets the {target} ms target with "
            "fewer, larger batches",
            over,
            f"ticks {tick / raised:.1f}x rarer, more changes per notification; each change "
            f"waits up to {raised - tick} ms longer (end-to-end p99 up by as much{grows})",
        )
    if e2e.p99 is not None and e2e.p99 > target:
        why = (
            f"kept: {tick} + {d.p99:.0f} = {tick + d.p99:.0f} ms (tick + delivery p99) fits "
            f"the {target} ms target, but the end-to-end p99 ({_ms(e2e.p99)}; "
            f"{s.held_changes} changes were held while push was degraded) misses it: the "
            "excess is not the tick's, and a longer tick would add to it"
        )
    else:
        why = (
            f"kept: {tick} + {d.p99:.0f} = {tick + d.p99:.0f} ms (tick + delivery p99) meets "
            f"the {target} ms target"
        ) + ("" if e2e.p99 is None else f", and the end-to-end p99 ({_ms(e2e.p99)}) too")
    return Recommendation(key, tick, tick, why, over)


def _ms(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0f} ms"


def _n(value: int) -> str:
    return f"{value:,}"


def counted(n: int, one: str, many: str = "") -> str:
    """``n`` and its noun, singular for one: "1 recovery", "2 recoveries"."""
    return f"{n:,} {one}" if n == 1 else f"{n:,} {many or one + 's'}"


def _quotient(a: int, b: int) -> str:
    """``a / b`` to one decimal, or to as many more as keep its whole part that of the
    quotient: the reason states ``a // b`` beside it, and ``296.0`` beside "holds 295" would
    contradict it."""
    whole = a // b
    for decimals in range(1, 12):
        text = f"{a / b:,.{decimals}f}"
        if float(text.replace(",", "")) < whole + 1:
            return text
    return f"{whole:,}.{'9' * 12}"


def _output_buffer(s: Summary, cfg: NamesrvConfig) -> Recommendation:
    """The buffer must hold ``FRAME_HEADROOM`` of the largest per-connection notification,
    rounded up to a power of two and never under ``MIN_OUTPUT_BUFFER``; only ever raised.
    The reason states each of those numbers as it was computed, so its arithmetic is the
    rule's."""
    key, current = "server.output_buffer_bytes", cfg.server.output_buffer_bytes
    if s.frame_bytes.max is None:
        return Recommendation(key, current, current, "kept: no notification was sent")
    largest = max(1, math.ceil(s.frame_bytes.max))
    room = FRAME_HEADROOM * largest
    rounded = 1 << math.ceil(math.log2(room))
    need = max(MIN_OUTPUT_BUFFER, rounded)
    holds = current // largest
    seen = (
        f"the largest notification was {_n(largest)} bytes per connection; "
        f"{_n(current)} bytes hold {_n(holds)} of them "
        f"({_n(current)} / {_n(largest)} = {_quotient(current, largest)})"
    )
    rule = (
        f"the rule wants {FRAME_HEADROOM} x {_n(largest)} = {_n(room)} bytes, rounded up to "
        f"the power of two {_n(rounded)}, and never less than the "
        f"{_n(MIN_OUTPUT_BUFFER)}-byte ({MIN_OUTPUT_BUFFER >> 20} MiB) floor: {_n(need)}"
    )
    if current >= need:
        return Recommendation(key, current, current, f"kept: {seen}; {rule}")
    if holds < FRAME_HEADROOM:
        why = (
            f"{seen}, fewer than {FRAME_HEADROOM}, so a briefly busy client is paused and "
            f"skipped ({s.slow_skips} skips seen); {rule}"
        )
    else:
        driver = "floor" if need > rounded else "power of two"
        why = (
            f"{seen}, at least the {FRAME_HEADROOM} wanted; it is raised to the {driver} "
            f"alone ({s.slow_skips} skips seen): {rule}"
        )
    return Recommendation(
        key,
        current,
        need,
        why,
        effect=f"a connection holds {_n(need // largest)} of the largest notification "
        f"({_n(need)} / {_n(largest)} = {_quotient(need, largest)}) before it is paused (was "
        f"{_n(holds)}); up to "
        f"{_n(need)} - {_n(current)} = {_n(need - current)} more bytes per busy connection",
    )


def _recovery_rate(s: Summary, cfg: NamesrvConfig) -> Recommendation:
    key, rate = "push.recovery_notifications_per_second", cfg.push.recovery_notifications_per_second
    recovered = [e for e in s.episodes if e.recovered_at_ms is not None]
    if not recovered:
        return Recommendation(key, rate, rate, "kept: push never recovered from degradation")
    relapsed = sum(e.relapsed for e in recovered)
    if relapsed and relapsed / len(recovered) >= RELAPSE_SHARE:
        lower = max(MIN_RECOVERY_RATE, rate // 2)
        return Recommendation(
            key,
            rate,
            lower,
            f"{relapsed} of {len(recovered)} recoveries degraded again before the backlog "
            "drained: the drain itself brings the pressure back",
            effect=f"backlogs drain at most {lower}/s (was {rate}/s), about twice as long; "
            "held changes reach clients later, and the drain no longer restarts the pressure",
        )
    drained = [e for e in recovered if e.drain_ms is not None and e.drain_frames is not None]
    slow = [e for e in drained if (e.drain_ms or 0) > DRAIN_TARGET_MS]
    if slow and not relapsed:
        frames = max(e.drain_frames or 0 for e in slow)
        wanted = math.ceil(frames * 1000 / DRAIN_TARGET_MS / 100) * 100
        higher = min(rate * 4, max(rate, wanted))
        if higher > rate:
            longest = max(e.drain_ms or 0 for e in slow)
            return Recommendation(
                key,
                rate,
                higher,
                f"backlogs took up to {longest} ms to drain ({frames} frames) with no relapse; "
                f"{higher}/s drains them within about {DRAIN_TARGET_MS} ms",
                effect=f"the longest drain about {longest * rate // higher} ms (was "
                f"{longest} ms): held changes reach clients that much sooner",
            )
    return Recommendation(
        key,
        rate,
        rate,
        f"kept: {counted(len(drained), 'backlog')} drained, {counted(relapsed, 'relapse')} "
        f"in {counted(len(recovered), 'recovery', 'recoveries')}",
    )


def _pressure(s: Summary, cfg: NamesrvConfig) -> list[Recommendation]:
    p = cfg.pressure
    keep = [
        Recommendation(
            "pressure.sample_interval_ms", p.sample_interval_ms, p.sample_interval_ms, ""
        ),
        Recommendation("pressure.cpu_low_percent", p.cpu_low_percent, p.cpu_low_percent, ""),
        Recommendation(
            "pressure.memory_low_percent", p.memory_low_percent, p.memory_low_percent, ""
        ),
    ]
    lengths = [e.degraded_ms for e in s.episodes if e.degraded_ms is not None]
    if len(lengths) < FLAP_EPISODES:
        why = (
            f"kept: {counted(len(lengths), 'degraded episode')} ended, {FLAP_EPISODES} needed "
            "to judge"
        )
        return [replace(r, reason=why) for r in keep]
    median = statistics.median(lengths)
    if median > FLAP_SAMPLES * p.sample_interval_ms:
        why = f"kept: degraded episodes last {median:.0f} ms (median), sustained pressure"
        return [replace(r, reason=why) for r in keep]
    flapping = (
        f"{len(lengths)} degraded episodes with a median of {median:.0f} ms, at most "
        f"{FLAP_SAMPLES} samples: push flaps on short spikes"
    )
    by_cpu = sum(
        1 for e in s.episodes if e.cpu_percent is not None and e.cpu_percent > p.cpu_high_percent
    )
    by_memory = sum(
        1
        for e in s.episodes
        if e.memory_percent is not None and e.memory_percent > p.memory_high_percent
    )
    interval = min(MAX_SAMPLE_INTERVAL_MS, p.sample_interval_ms * 2)
    out = [
        Recommendation(
            "pressure.sample_interval_ms",
            p.sample_interval_ms,
            interval,
            f"{flapping}; a longer sample averages them out",
            effect=f"pressure read every {interval} ms (was {p.sample_interval_ms}): spikes "
            f"shorter than that rarely switch push off; a real overload is seen up to "
            f"{interval - p.sample_interval_ms} ms later, and recovery as much later",
        )
    ]
    for name, count, low, high in (
        ("cpu", by_cpu, p.cpu_low_percent, p.cpu_high_percent),
        ("memory", by_memory, p.memory_low_percent, p.memory_high_percent),
    ):
        out.append(_low_mark(name, count, low, high))
    return out


def _low_mark(name: str, count: int, low: float, high: float) -> Recommendation:
    """The low mark of a resource ``count`` flapping episodes began on: widened to
    ``high - 2 * (high - low)`` (at least 5 %)."""
    key = f"pressure.{name}_low_percent"
    wider = round(max(5.0, high - 2 * (high - low)), 1)
    if count and wider < low:
        return Recommendation(
            key,
            low,
            wider,
            f"{count} episodes began on {name}; recovering only below {wider} widens "
            "the hysteresis",
            effect=f"push comes back only under {wider} % {name} (was {low} %): fewer "
            "episodes in a row, each possibly longer",
        )
    if count:
        return Recommendation(
            key, low, low, f"kept: the {name} hysteresis is already {high - low:.1f} points wide"
        )
    return Recommendation(key, low, low, f"kept: no episode began on {name}")


def changes_live(key: str) -> bool:
    """Whether the name server takes ``key`` at run time (UPDATE_NAMESRV_CONFIG,
    ``namesrv-admin updateNamesrvConfig``); any other key takes a restart."""
    known = resolve_key(key)
    return known is not None and known.runtime


def how_to_apply(r: Recommendation) -> str:
    """How an operator puts a changed key into effect on a running name server."""
    if changes_live(r.key):
        return (
            f"at run time: `namesrv-admin -n HOST:PORT updateNamesrvConfig -k {r.key} -v "
            f"{r.suggested}` (every name server of `-n`); it lasts until a restart, so merge "
            "it into the config file too"
        )
    return (
        f"restart: merge it into the config file under `[{r.key.rpartition('.')[0]}]` and "
        "restart the name server (UPDATE_NAMESRV_CONFIG refuses it)"
    )


def tuned_keys(recommendations: list[Recommendation]) -> dict[str, int | float]:
    """The keys whose value changes, with their new values: all ``namesrv-tuned.toml`` holds."""
    return {r.key: r.suggested for r in recommendations if r.changed}


def tuned(config: NamesrvConfig, recommendations: list[Recommendation]) -> NamesrvConfig:
    """``config`` with every suggested value applied (validated like a loaded file)."""
    sections: dict[str, dict[str, int | float]] = {}
    for rec in recommendations:
        section, _, name = rec.key.partition(".")
        sections.setdefault(section, {})[name] = rec.suggested
    return replace(
        config,
        **{
            section: replace(getattr(config, section), **values)
            for section, values in sections.items()
        },
    )
