"""Generation check: answers from retrieved context judged against reference answers
by an LLM, and LLM-suggested relevance labels. Optional: nothing here runs unless a provider is
configured (`config.configured`). Reference: docs/generation.md."""
