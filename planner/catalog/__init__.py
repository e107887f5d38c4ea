"""The catalog layer: the schemas of catalog entries and of requests, loading, HF configs,
price freshness, rental offers and framework profiles."""
