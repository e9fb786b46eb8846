"""The floor: PyYAML's C loader composing every file gpulint would read, and nothing else."""

from __future__ import annotations

import os
import sys

import yaml

SUFFIXES = (".yaml", ".yml", ".json")


def main(root: str) -> int:
    documents = 0
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(SUFFIXES):
                with open(os.path.join(directory, name), "rb") as handle:
                    for _ in yaml.compose_all(handle.read(), Loader=yaml.CSafeLoader):
                        documents += 1
    print(f"{documents} documents")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
