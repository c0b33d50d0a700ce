"""The exceptions zephon-chaos raises on purpose: one tree, rooted at :class:`ChaosError`.

``except ChaosError`` catches everything this tool raises on purpose and nothing that Zephon,
torch or Python raise, so a caller (the command line, a fixture, a test) can tell "the tool
said no" from "the code under test broke". The kinds below say who must act: the user
(:class:`InvalidInput`), the harness or its host (:class:`HarnessError`), or the code under
test (:class:`Violation`).

Each class stays in the module that raises it and also keeps the builtin base it had
(``class ScenarioError(SpecError)``, ``class SpecError(InvalidInput, ValueError)``), so every
``except ValueError`` written before the tree still catches it. This module sits at the
bottom of the stack and imports nothing from the package; every layer may import it.
"""

from __future__ import annotations

__all__ = ["ChaosError", "HarnessError", "InvalidInput", "Violation"]


class ChaosError(Exception):
    """The root: an error zephon-chaos raised on purpose; the message names cause and way out."""


class InvalidInput(ChaosError):
    """Bad input from whoever drives the tool: a scenario file, a flag, a trigger, a recipe's
    environment, a report to merge, an API request. The command line answers it with its
    message and exit status 2; fixing the input fixes it."""


class HarnessError(ChaosError):
    """The harness could not do what it must (place a proxy, serve the proxy API, stop a
    process, run a namespace command, start a warm lane, measure): the run says nothing about
    the code under test. The message names the step and what on the host to fix."""


class Violation(ChaosError):
    """What was checked did not hold: a group that had to succeed, a recipe rule, a scenario's
    oracles. A finding about the code under test; its subclasses keep ``AssertionError`` so
    that pytest and Hypothesis report it as a failed check."""
