"""Corpus recipes, found by module: every module of this package that defines `RECIPE` (a
`_common.Recipe`) is one, under `RECIPE.name`. Adding a corpus is adding a module here; no list
names them. Modules whose name starts with "_" hold shared code and are not recipes.
"""

from __future__ import annotations

import importlib
import pkgutil

from fdeval.errors import ConfigError

from ._common import Recipe


def all_recipes() -> dict[str, Recipe]:
    """Every recipe by name, sorted."""
    found: dict[str, Recipe] = {}
    for m in pkgutil.iter_modules(__path__):
        if m.name.startswith("_"):
            continue
        recipe = getattr(importlib.import_module(f"{__name__}.{m.name}"), "RECIPE", None)
        if isinstance(recipe, Recipe):
            if recipe.name in found:
                raise ConfigError(
                    f"two corpus recipes are named {recipe.name!r} ({m.name}.py and another module)"
                )
            found[recipe.name] = recipe
    return dict(sorted(found.items()))


def get_recipe(name: str) -> Recipe:
    recipes = all_recipes()
    if name not in recipes:
        raise ConfigError(f"unknown corpus recipe {name!r}; valid: {', '.join(recipes)}")
    return recipes[name]


__all__ = ["Recipe", "all_recipes", "get_recipe"]
