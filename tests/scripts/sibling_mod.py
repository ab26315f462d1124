"""Imported by other test scripts through sys.path[0]."""
VALUE = "sibling ok"
