"""Is a path a kustomization names local, or something kustomize would fetch?

kustomize decides per reference (kustomize: api/internal/loader/fileloader.go, ``New`` and
``Load``): a base, component or resource directory is first parsed as a git repository
(api/internal/git/repospec.go, ``NewRepoSpecFromURL``) and cloned when that parse succeeds;
a file is downloaded when its URL scheme is ``http`` or ``https``. The repository parse:

* drops a ``?query`` (``ref=``, ``version=``, ``timeout=``, ``submodules=``) and a forced
  ``git::`` prefix (case-insensitive);
* takes a scheme among ``ssh://``, ``https://``, ``http://``, ``file://`` (case-insensitive);
* takes a user name (``git@``, ``foo@``) before the host;
* accepts an scp-style ``host:org/repo`` when there is no scheme and there is a user name or
  the host is ``github.com`` (``github.com:org/repo``, ``github.com/org/repo``).

Git itself reads ``host:path`` (no slash before the colon) as ssh, and other kustomize
versions and go-getter know ``gh:``-like aliases, ``gitlab.com/``, ``bitbucket.org/`` and
bucket hosts. gpulint never downloads, so the question it must not get wrong is "could this
reach the network?": ``remote_reason`` follows the same steps and answers yes for everything
kustomize would fetch and for every form git or an older kustomize would, at the price of
calling an odd local name (``a:b``, ``x?y``, ``a//b``) remote, which only means the unit is
not rendered (GL705).
"""

from __future__ import annotations

import re

# RFC 3986 scheme, then ":" (``https:``, ``gh:``, ``github.com:``, ``git+ssh:``).
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
# go-getter's forced getter, ``git::https://...``, ``s3::...``.
_FORCED = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)::")
# Hosts that kustomize or go-getter read without a scheme (``github.com/org/repo``).
_BARE_HOSTS = ("github.com", "gitlab.com", "bitbucket.org")
_BUCKET_HOSTS = (".amazonaws.com", "storage.googleapis.com", "www.googleapis.com")
_KUSTOMIZE_SCHEMES = ("ssh", "https", "http", "file")


def remote_reason(reference: str) -> str | None:
    """Why kustomize (or git beneath it) would fetch ``reference`` over the network or from
    outside the tree; None for a plain local path."""
    text = reference.strip()
    if not text:
        return None
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        # kustomize's URL parse rejects control characters, but git does not: never local.
        return "a name with control characters"
    forced = _FORCED.match(text)
    if forced:
        return f"a forced `{forced.group(1)}::` download"
    path, query_mark, _ = text.partition("?")
    scheme = _SCHEME.match(path)
    if scheme:
        name = scheme.group(1).lower()
        if name in _KUSTOMIZE_SCHEMES:
            return f"a {name}:// URL"
        if "/" not in name and "." in name:
            return f"an scp-style git address on host {scheme.group(1)}"
        return f"a `{scheme.group(1)}:` git alias or URL scheme"
    head = path.split("/", 1)[0]
    if "@" in head:
        return "a git address with a user name"
    if ":" in head:
        return "an scp-style git address"
    lowered = head.lower()
    if lowered in _BARE_HOSTS:
        return f"a {lowered} repository"
    if lowered.endswith(_BUCKET_HOSTS):
        return f"a bucket on {lowered}"
    if query_mark:
        return "a git reference with a query"
    if "//" in path or "_git/" in path:
        return "a git repository with a path inside it"
    return None


def is_remote(reference: str) -> bool:
    return remote_reason(reference) is not None
