"""The explorer: a time-boxed Hypothesis search over scenarios, shrinking, findings, reports.

``search`` runs the search, ``signature`` names a failure's kind (the deduplication key),
``known`` lists the known defects of Zephon, ``findings`` confirms and saves a minimal
failing scenario, ``summary`` writes the summary and ``picture`` the PNG.
"""
