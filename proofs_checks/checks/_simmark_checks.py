"""Check E20 — SimMark's law and p-value."""
