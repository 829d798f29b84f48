"""Strategy B of Algorithm 1: retrieval index, decomposer and batched verification."""
