"""Curating a suite's judgments: pooling unjudged top-k targets across systems (`pool`), judging
sheets written out and merged back (`judging`), agreement with a second judging pass
(`agreement`), and rewriting chunk-id judgments as evidence spans (`span_conversion`).
"""
