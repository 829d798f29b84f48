"""Search building blocks the estimators use: the retrieval index, the decomposer, the posterior average."""
