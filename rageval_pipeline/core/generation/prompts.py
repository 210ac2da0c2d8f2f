"""The prompts, as versioned constants: a changed prompt changes its hash, so cached answers
and stored reference answers written under the old wording are never reused silently.

- GROUND_TRUTH: the offline synthesis of a reference answer from the query's most
  relevant documents.
- RAG_ANSWER: the answer a RAG system gives from its own retrieved context.
- CORRECTNESS: the LLM-as-judge comparison of answer and reference, binary TRUE/FALSE.
- RELEVANCE: a 0-3 grading prompt after UMBRELA (Upadhyay et al. 2024), which reuses the
  descriptive-grade prompt of Thomas et al. 2023 ("Large language models can accurately
  predict searcher preferences"), with TREC's four grades.
"""

from __future__ import annotations

PROMPT_VERSION = "1"

GROUND_TRUTH = """Based on the following documents, provide a comprehensive answer to this question:
Question: {query}

{context}

Provide a factual, well-structured answer that synthesizes information from the documents.
Focus on accuracy and completeness."""

RAG_ANSWER = """Answer the question using only the context below. If the context does not hold
the answer, say that you do not know.

Context:
{context}

Question: {query}
Answer:"""

CORRECTNESS = """Compare these two answers and respond with only TRUE or FALSE.
Question: {query}
Generated Answer: {answer}
Ground Truth Answer: {reference}
Are these answers semantically equivalent (do they convey the same factual information)?
Respond with only: TRUE or FALSE"""

RELEVANCE = """Given a query and a passage, you must provide a score on an integer scale of 0 to 3
with the following meanings:
0 = represent that the passage has nothing to do with the query,
1 = represents that the passage seems related to the query but does not answer it,
2 = represents that the passage has some answer for the query, but the answer may be a bit
unclear, or hidden amongst extraneous information and
3 = represents that the passage is dedicated to the query and contains the exact answer.

Important Instruction: Assign category 1 if the passage is somewhat related to the topic but
not completely, category 2 if passage presents something very important related to the entire
topic but also has some extra information and category 3 if the passage only and entirely
refers to the topic. If none of the above satisfies give it category 0.

Query: {query}
Passage: {passage}

Split this problem into steps:
Consider the underlying intent of the search.
Measure how well the content matches a likely intent of the query (M).
Measure how trustworthy the passage is (T).
Consider the aspects above and the relative importance of each, and decide on a final score (O).
Final score must be an integer value only.
Do not provide any code in result. Provide each score in the format of: ##final score: score
without providing any reasoning."""


def documents_block(texts: list[tuple[str, str]]) -> str:
    """The context layout every prompt shares: `Document i:` then `Title:` and the text."""
    return "\n\n".join(
        f"Document {i}:\nTitle: {title}\n{text}" for i, (title, text) in enumerate(texts, 1)
    )


# InPars (Bonifacio et al. 2022) / Promptagator (Dai et al. 2022): a query written from a
# sampled passage, which then counts as relevant to it only after the round-trip filter.
SYNTHETIC_QUERY = """Here is a passage from a documentation collection.

Passage: {passage}

Write one search query that a user of this documentation would type and that this passage
answers. Do not copy a sentence of the passage. Reply with the query only, on one line."""
