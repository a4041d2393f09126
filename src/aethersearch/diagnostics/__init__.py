"""The diagnostics stage: what a finished run is rerun with (``rerun``) for its probes."""
