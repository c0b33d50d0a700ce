"""Leak checks: processes, listening ports and temp entries a test or a run leaves behind."""
