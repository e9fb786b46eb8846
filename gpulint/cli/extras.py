"""Which optional dependencies (pyproject.toml's extras) a front door needs, and the error
when they are not installed."""

from __future__ import annotations

# What each optional front door needs (pyproject.toml's extras), by the modules it imports.
EXTRAS = {
    "live": ("prometheus_api_client", "requests"),
    "cluster": ("kubernetes",),
    "webhook": ("aiohttp", "kubernetes", "prometheus_client"),
}


def missing_extra(extra: str, what: str) -> str | None:
    """A one-line error when ``what`` needs an extra that is not installed, else None."""
    from importlib.util import find_spec

    missing = []
    for module in EXTRAS[extra]:
        try:
            found = find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(module)
    if not missing:
        return None
    return (
        f"{what} needs the optional dependencies of gpulint[{extra}] ({', '.join(missing)} "
        f"missing): pip install 'gpulint[{extra}]'"
    )
