"""Acquisition profiles: which fields a run must fill, how, and in what order.

A profile is static code, never checkpoint state (state names the profile). Recipes for
how to acquire a field are derived from the profile and the run's dynamic decompositions
each time they are needed (see ``recipes.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeGuard

Strategy = Literal["bootstrap", "web", "ask", "derived"]
"""bootstrap: asked before anything else; web: searched first, asked after failed
searches; ask: asked of the user; derived: computed by the calculator from components."""

AnswerKind = Literal["region", "currency", "number", "text"]

REGION = "core.region"
CURRENCY = "core.currency"
BOOTSTRAP_FIELDS = (REGION, CURRENCY)


@dataclass(frozen=True)
class FieldSpec:
    """One field of a profile: how it is acquired and what a valid value looks like."""

    name: str
    label: str
    strategy: Strategy
    kind: AnswerKind = "number"
    prompt: str = ""
    unit: str = ""
    min_value: float | None = None
    max_value: float | None = None
    components: tuple[str, ...] = ()
    """For derived fields: the inputs the calculator multiplies."""
    queries: tuple[str, ...] = ()
    """For web fields: query templates, one per search attempt (``{region}`` is filled)."""


@dataclass(frozen=True)
class Profile:
    """A named set of fields in acquisition order, with the run's attempt caps."""

    name: str
    title: str
    fields: tuple[FieldSpec, ...]
    search_cap: int = 2
    """Searches per field before the policy asks the user instead."""
    ask_cap: int = 3
    """Questions per field (answers counted, valid or not) before giving up on it."""
    bootstrap_attempts: int = 3
    """Questions for region/currency before the run aborts."""
    calc_cap: int = 3
    """Calculator runs per run."""

    def field(self, name: str) -> FieldSpec:
        """The field ``name``; ``KeyError`` names the fields this profile has."""
        for spec in self.fields:
            if spec.name == name:
                return spec
        known = ", ".join(f.name for f in self.fields)
        raise KeyError(f"profile {self.name!r} has no field {name!r}; fields: {known}")

    def has(self, name: str | None) -> TypeGuard[str]:
        """Whether ``name`` is a field of this profile."""
        return any(spec.name == name for spec in self.fields)

    @property
    def derived(self) -> tuple[FieldSpec, ...]:
        """The calculator-backed fields."""
        return tuple(f for f in self.fields if f.strategy == "derived")


MARKET_SIZING = Profile(
    name="market_sizing",
    title="Market sizing (TAM = population x adoption rate x yearly price)",
    fields=(
        FieldSpec(REGION, "Region", "bootstrap", kind="region",
                  prompt="Which region should the market be sized for?"),
        FieldSpec(CURRENCY, "Currency", "bootstrap", kind="currency",
                  prompt="Which currency should prices and the TAM use (ISO 4217 code)?"),
        FieldSpec("market.population", "Population", "web", unit="people",
                  prompt="What is the population of {region}?", min_value=1,
                  max_value=2_000_000_000,
                  queries=("{region} population 2024", "total population of {region} residents")),
        FieldSpec("market.adoption_rate", "Adoption rate", "web", unit="share (0-1)",
                  prompt="What share of people in {region} would use {subject} (0 to 1, "
                         "or a percentage like 18%)?",
                  min_value=0, max_value=1,
                  queries=("{region} {subject} adoption rate",
                           "share of adults using {subject} in {region}")),
        FieldSpec("market.price", "Yearly price", "ask", unit="{currency} per year",
                  prompt="What yearly price per user of {subject} (in {currency}) should we "
                         "assume?",
                  min_value=0, max_value=1_000_000),
        FieldSpec("market.tam", "Total addressable market", "derived", unit="{currency} per year",
                  components=("market.population", "market.adoption_rate", "market.price")),
    ),
)

PROFILES: dict[str, Profile] = {MARKET_SIZING.name: MARKET_SIZING}
"""Profiles a run can be started with, by name."""
DEFAULT_PROFILE = MARKET_SIZING.name
"""The profile of a run started without naming one."""


def get_profile(name: str) -> Profile:
    """The profile ``name``; ``KeyError`` names the known profiles."""
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(
            f"unknown profile {name!r}; known profiles: {', '.join(sorted(PROFILES))}"
        ) from None
