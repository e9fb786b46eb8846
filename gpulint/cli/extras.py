"""Which optional dependencies (pyproject.toml's extras) a front door needs, and the error
when they are not installed."""

from __future__ import annotations

# What each optional front door needs (pyproject.toml's extras), by the modules it imports.
EXTRAS = {
    "live": ("prometheus_api_client", "requests"),
    "cluster": ("kubernetes",),
    "webhook": ("aiohttp", "kubernetes", "prometheus_client"),
}
# The distributions that provide those modules, as pip names them.
DISTRIBUTIONS = {
    "prometheus_api_client": "prometheus-api-client",
    "prometheus_client": "prometheus-client",
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
    # gpulint is installed from a git commit or a wheel, not a package index, so
    # ``pip install 'gpulint[live]'`` would look for it where it is not: name the missing
    # packages, and the extra for the next install from the same source.
    packages = " ".join(DISTRIBUTIONS.get(module, module) for module in missing)
    return (
        f"{what} needs the optional dependencies of gpulint[{extra}] ({', '.join(missing)} "
        f"missing): pip install {packages}, or install gpulint with [{extra}] as in the "
        f'README (pip install "gpulint[{extra}] @ git+...")'
    )
