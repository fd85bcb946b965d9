"""Operations: health (/livez, /readyz) and Prometheus metrics."""
