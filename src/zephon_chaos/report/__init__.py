"""Failure reports: pytest report sections, artifact files, JUnit properties."""
