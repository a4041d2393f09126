"""Benchmark curation: official sources -> exclusion, selection, audit -> frozen release."""
