"""One adapter per upstream file format; each module opens with its citation."""
