"""Operations: the clock, typed events, the event journal, Prometheus metrics, the audit trail."""
