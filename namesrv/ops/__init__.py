"""Operations: the event journal, Prometheus metrics, paced logging and duration histograms."""
