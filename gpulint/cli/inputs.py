"""What a command reads before it runs: the configuration, the rule selection, and the
lint units of the paths given or the cluster's inventory."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from gpulint.cli.extras import missing_extra
from gpulint.cli.options import split_ids

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from gpulint.engine.assembly import Assembly
    from gpulint.engine.config import Settings
    from gpulint.engine.registry import Selection
    from gpulint.inventory import Inventory


def read_settings(args: argparse.Namespace, stderr: TextIO) -> Settings | None:
    """The configuration in use: ``--config``, else ``.gpulint.yaml`` found upward from the
    working directory (``--no-config``: none). None after an error, said on stderr."""
    from gpulint.engine.config import ConfigError, Settings, find_config, load_settings
    from gpulint.engine.registry import rule_names, rule_option_schemas

    path = None if getattr(args, "no_config", False) else (args.config or find_config())
    if path is None:
        return with_version_options(Settings(), args)
    try:
        settings = load_settings(path, rule_option_schemas(), rule_names())
    except ConfigError as error:
        for line in str(error).splitlines():
            stderr.write(f"gpulint: configuration error: {line}\n")
        return None
    return with_version_options(settings, args)


def with_version_options(settings: Settings, args: argparse.Namespace) -> Settings:
    """``settings`` with the releases ``--kubernetes-version`` ... name for this run."""
    from gpulint.engine.versions import OPTION, PROJECTS, parse_release

    for project in PROJECTS:
        text = getattr(args, f"{project}_version", None)
        release = parse_release(text) if isinstance(text, str) else None
        if release is not None:
            settings.versions = settings.versions.with_release(project, release, OPTION)
    return settings


def read_selection(args: argparse.Namespace, stderr: TextIO) -> Selection | None:
    """``--select``/``--ignore``, every entry a rule ID, name or ID prefix (``GL4``); None
    after an unknown one, said on stderr with the nearest rule."""
    from gpulint.engine.registry import Selection, unknown_rule_patterns

    select, ignore = split_ids(args.select), split_ids(args.ignore)
    for option, patterns in (("--select", select), ("--ignore", ignore)):
        for pattern, suggestion in unknown_rule_patterns(patterns):
            hint = f"; did you mean {suggestion}?" if suggestion else " (see `gpulint rules`)"
            stderr.write(f"gpulint: error: {option} {pattern}: no such rule{hint}\n")
            return None
    return Selection(select, ignore)


def _cluster_inventory(
    args: argparse.Namespace, settings: Settings, selection: Selection
) -> tuple[Inventory, list[str]]:
    """``--cluster``: the inventory read from the cluster (raises InputError)."""
    from gpulint.cluster.kinds import AdapterConfigMapSelector, parse_configmap_namespaces
    from gpulint.cluster.mode import ClusterError, cluster_inventory

    if args.paths:
        raise ClusterError("--cluster reads the cluster: give no PATH with it")
    try:
        adapter = AdapterConfigMapSelector.parse(
            args.adapter_configmap, args.adapter_configmap_selector
        )
    except ValueError as error:
        raise ClusterError(str(error)) from None
    try:
        configmap_namespaces = parse_configmap_namespaces(args.configmap_namespaces)
    except ValueError as error:
        raise ClusterError(f"--configmap-namespaces: {error}") from None
    return cluster_inventory(
        settings,
        selection,
        kubeconfig=args.kubeconfig,
        context=args.context,
        namespace=args.namespace,
        adapter_configmaps=adapter,
        configmap_namespaces=configmap_namespaces,
    )


def prepared_cluster(
    args: argparse.Namespace,
    settings: Settings,
    selection: Selection,
    prepare: Callable[[Inventory], object] | None,
    stderr: TextIO,
) -> tuple[Inventory, list[str]] | None:
    """The cluster's inventory and notes, prepared by ``prepare`` when given (the live
    check takes its snapshot for it); None after an error said on stderr."""
    from gpulint.input.loader import InputError

    problem = missing_extra("cluster", "--cluster")
    if problem is not None:
        stderr.write(f"gpulint: error: {problem}\n")
        return None
    try:
        inventory, notes = _cluster_inventory(args, settings, selection)
    except InputError as error:
        stderr.write(f"gpulint: error: {error}\n")
        return None
    if prepare is not None:
        prepare(inventory)
    return inventory, notes


def assembled(args: argparse.Namespace, settings: Settings, stderr: TextIO) -> Assembly | None:
    """The run's units, rendered, with the cluster context of each
    (``gpulint.engine.assembly``); None after an error said on stderr."""
    from gpulint.engine.assembly import assemble
    from gpulint.input.loader import InputError
    from gpulint.input.units import RenderOptions

    options = RenderOptions(
        getattr(args, "kustomize", None),
        getattr(args, "helm", None),
        getattr(args, "helm_values", None),
        args.max_file_size,
        getattr(args, "stdin_filename", None),
    )
    try:
        return assemble(args.paths or ["."], settings, options, args.max_file_size)
    except InputError as error:
        stderr.write(f"gpulint: error: {error}\n")
        return None
