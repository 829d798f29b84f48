"""Search building blocks the estimators use: the retrieval index, the decomposer, the posterior
average, and the likelihood search over candidate decompositions with a language model."""
