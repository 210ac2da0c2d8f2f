"""Curating a suite's judgments: pooling unjudged top-k targets across systems (`pool`), judging
sheets as files (`sheets`) written out and merged back (`judging`), how two passes agree
(`agreement`, `readings`: kappas, evidence F1), a second pass's disagreements with the suite
decided by a blind third reading (`third`), a nugget-level re-reading of a uniformly drawn sample
(`draw`, `nuggets`, `nugget_third`), and rewriting chunk-id judgments as evidence spans
(`span_conversion`).
"""
