"""Proxy embeddings Gamma: probe networks, gradient / Fisher / adapted estimators, PCA."""

from taskextrap.embed.estimators import (
    EMBEDDINGS,
    ProxyEmbedding,
    check_embedding,
    fit_library_embedding,
    mean_per_task,
)

__all__ = ["EMBEDDINGS", "ProxyEmbedding", "check_embedding", "fit_library_embedding", "mean_per_task"]
