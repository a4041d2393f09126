"""The diagnostics stage: factorised metrics (WebDetective), the Forget, Lead-astray and distractor probes, and
what a finished run is rerun with (``rerun``).

Why apart from ``scoring``: scoring turns a run into its scores; these read a scored run again, with the
release's evidence chains, and some rerun its questions, so they sit one floor above it.
"""

__all__: list[str] = []
