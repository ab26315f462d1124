"""The TUI's widgets: one per file; each styles itself with ``DEFAULT_CSS``."""
