"""Modal screens of the TUI: help and quit confirmation."""
