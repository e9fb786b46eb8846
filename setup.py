"""gpulint's packages are found, not listed: ``gpulint/`` installs as ``gpulint``, and the
top-level ``rules/`` and ``webhook/`` install beneath it as ``gpulint.rules`` and
``gpulint.webhook``. Every directory under the three roots is a package (namespace discovery),
and every file in it ships, so a new module or data file cannot be left out of the wheel.
Everything else about the project is in pyproject.toml."""

from setuptools import find_namespace_packages, setup

ROOTS = {"gpulint": "gpulint", "gpulint.rules": "rules", "gpulint.webhook": "webhook"}
BUILD_LEFTOVERS = ["*__pycache__*"]


def packages() -> list[str]:
    found = []
    for name, directory in ROOTS.items():
        found.append(name)
        found += [
            f"{name}.{sub}"
            for sub in find_namespace_packages(directory, exclude=BUILD_LEFTOVERS)
            if f"{name}.{sub}" not in ROOTS
        ]
    return sorted(found)


setup(
    packages=packages(),
    package_dir=ROOTS,
    package_data={"": ["*"]},
    exclude_package_data={"": ["*.pyc"]},
)
