"""Curating a suite's judgments: pooling unjudged top-k targets across systems (`pool`), judging
sheets written out and merged back (`judging`), and agreement with a second judging pass
(`agreement`).
"""
