"""What the sequence-model experiments run (paper §4): a training seed's fine-tuning runs, every
method's answers to the held-out tasks, and the records of the prompts they answered from.

One module per task family (``codeio``, ``parity``). They sit above the estimators and the
baselines, whose ``SequenceRTE`` and prompting methods they call, and below the experiments
wing, which registers them, caches their units and writes their rows. The language models,
prompts and corpora themselves are in ``taskextrap.llm``.
"""
