"""The decomposition planner's own exception types: every plan problem is one of these."""

from __future__ import annotations

from collections.abc import Sequence


class PlanError(ValueError):
    """A plan could not be turned into a valid task DAG."""


class PlanParseError(PlanError):
    """The model's plan text has a shape none of the three plan forms accept."""


class SchemaVersionError(PlanParseError):
    """A forge-lcdl decision pack declares a ``schema_version`` other than 2."""


class MissingStartError(PlanParseError):
    """A forge-lcdl decision pack has no ``start`` or names a node it does not define."""


class DuplicateTaskError(PlanError):
    """Two tasks of one plan share an id."""


class UnknownDependencyError(PlanError):
    """A task depends on an id the plan does not define (policy ``error``)."""


class CycleError(PlanError):
    """The dependencies form a cycle; ``path`` lists it, first id repeated at the end."""

    def __init__(self, path: Sequence[str], where: str = "plan") -> None:
        self.path = list(path)
        arrow = " → ".join(self.path)
        super().__init__(
            f"dependency cycle in {where}: {arrow}; remove one of these dependencies"
        )
