"""Configuration validation: Zephon's own rules (table (a)) and the recipe contract (table (b)).

``rules`` and ``recipe_rules`` hold the tables as objects (``docs/validation.md`` is rendered
from them); ``configs`` generates configurations; ``probe`` runs one against real Zephon.
Importing this package imports neither torch nor Zephon; only ``probe`` does.
"""
