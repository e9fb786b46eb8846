"""The serving certificate: TLS 1.2 or newer, reloaded when cert-manager rotates the files.

Without ``--client-ca`` the server keeps one ``ssl.SSLContext`` for its whole life. When the
certificate or key file changes, gpulint reads both once, checks that they form a pair in a
scratch context, and only then loads the same bytes into the server's context, so new
handshakes use the new pair and connections already open keep theirs. A half-written or
mismatched pair (the files are replaced one after the other) is not loaded; the next check
tries again.

The bytes are handed to OpenSSL through anonymous in-memory files (``memfd``), so that
nothing is written to disk: the image runs with a read-only root filesystem.

With ``--client-ca``, the server asks each client for a certificate and verifies one that is
presented against the CAs of that bundle: a certificate they did not issue fails the
handshake. One that presents none still completes it, so that the kubelet's probes (which
present none) reach ``/healthz`` and ``/readyz``; ``/validate`` answers such a client 401
before reading its body (``webhook.app``). The bundle is reloaded as the pair is; since the
CAs a context trusts can be added to but never taken out, a changed bundle is loaded into a
new context, which new connections get (``ServingCertificate.context``), while open ones keep
theirs.

Only regular files are read (through symlinks, as a Secret volume has them), at most
``MAX_FILE_BYTES`` of them: a FIFO would block the start (or a reload) until someone wrote to
it, a device could be read without end. A private key encrypted with a pass phrase is an
error that says so: OpenSSL would otherwise ask for the pass phrase on the terminal, and a
server has nobody to answer. Both hold for the first load and every reload.
"""

from __future__ import annotations

import hashlib
import os
import ssl
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

# A certificate chain or a key is a few kilobytes; a chain of a hundred certificates, 200 KiB.
MAX_FILE_BYTES = 1 << 20


class CertificateError(Exception):
    """The certificate or key cannot be read or do not form a pair."""


class _PassPhraseAsked(Exception):
    """OpenSSL asked for the pass phrase of an encrypted key."""


def _no_pass_phrase() -> bytes:
    raise _PassPhraseAsked


@dataclass(frozen=True)
class _Signature:
    """What changes when either file is replaced (a Secret volume swaps a symlink)."""

    stats: tuple[tuple[int, int, int, int], ...]


def _signature(paths: tuple[str, ...]) -> _Signature:
    stats = []
    for path in paths:
        try:
            st = os.stat(path)
            stats.append((st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns))
        except OSError:
            stats.append((0, 0, -1, 0))
    return _Signature(tuple(stats))


@contextmanager
def _memory_file(name: str, data: bytes) -> Iterator[str]:
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    # Without memfd (not Linux), a private temporary file; the container image is Linux.
    import tempfile

    with tempfile.NamedTemporaryFile(prefix=name) as handle:
        handle.write(data)
        handle.flush()
        yield handle.name


def _read(path: str, what: str) -> bytes:
    """The bytes of a regular file; opened without blocking, so that a FIFO cannot stall."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise CertificateError(f"cannot read the {what} {path}: {error.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise CertificateError(
            f"the {what} {path} is not a regular file ({_file_type(mode)}); give the path of "
            "the PEM file"
        )
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as error:
            raise CertificateError(f"cannot read the {what} {path}: {error.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise CertificateError(
            f"the {what} {path} is larger than {MAX_FILE_BYTES >> 20} MiB: not a PEM file"
        )
    return data


def _file_type(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a file"


def _load_pair(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    with (
        _memory_file("gpulint-cert", cert) as cert_path,
        _memory_file("gpulint-key", key) as key_path,
    ):
        try:
            context.load_cert_chain(cert_path, key_path, password=_no_pass_phrase)
        except _PassPhraseAsked:
            raise CertificateError(
                "the private key is encrypted with a pass phrase, which gpulint serve cannot "
                "be given: use an unencrypted key (a kubernetes.io/tls Secret holds one), for "
                "example `openssl pkey -in encrypted.key -out tls.key`"
            ) from None
        except ssl.SSLError as error:
            reason = error.reason or str(error)
            raise CertificateError(
                f"the certificate and key do not load as a pair ({reason})"
            ) from None
        except OSError as error:
            raise CertificateError(f"cannot load the certificate: {error}") from None


def _load_client_cas(context: ssl.SSLContext, bundle: bytes, path: str) -> None:
    if b"-----BEGIN CERTIFICATE-----" not in bundle:
        raise CertificateError(
            f"the client CA bundle {path} holds no certificate (PEM, -----BEGIN CERTIFICATE-----)"
        )
    try:
        context.load_verify_locations(cadata=bundle.decode("ascii"))
    except (UnicodeDecodeError, ssl.SSLError) as error:
        reason = getattr(error, "reason", None) or type(error).__name__
        raise CertificateError(
            f"the client CA bundle {path} does not load as PEM certificates ({reason})"
        ) from None
    context.verify_mode = ssl.CERT_OPTIONAL


def server_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    # Forward-secret AEAD suites only for TLS 1.2 (TLS 1.3 suites are all of that kind).
    context.set_ciphers("ECDHE+AESGCM:ECDHE+CHACHA20")
    return context


class ServingCertificate:
    """The certificate and key files (and the client CA bundle, with ``--client-ca``), and
    the server context they are loaded into."""

    def __init__(self, cert_path: str, key_path: str, client_ca_path: str | None = None) -> None:
        self.cert_path = cert_path
        self.key_path = key_path
        self.client_ca_path = client_ca_path
        self._paths = (cert_path, key_path, *((client_ca_path,) if client_ca_path else ()))
        self.context = server_context()
        self._signature = _signature(self._paths)
        self._digest = ""
        self._ca_digest = ""
        self._load()

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the certificate file as loaded (for logs)."""
        return self._digest

    def _load(self) -> bool:
        cert = _read(self.cert_path, "certificate")
        key = _read(self.key_path, "key")
        bundle = b""
        if self.client_ca_path is not None:
            bundle = _read(self.client_ca_path, "client CA bundle")
        digest = hashlib.sha256(cert + b"\0" + key).hexdigest()
        ca_digest = hashlib.sha256(bundle).hexdigest() if bundle else ""
        if digest == self._digest and ca_digest == self._ca_digest:
            return False
        scratch = server_context()
        _load_pair(scratch, cert, key)  # a pair that fails here never reaches the server
        if self.client_ca_path is not None:
            _load_client_cas(scratch, bundle, self.client_ca_path)
        if ca_digest != self._ca_digest:
            self.context = scratch  # for new handshakes; open connections keep the old one
        else:
            _load_pair(self.context, cert, key)
        self._digest = digest
        self._ca_digest = ca_digest
        return True

    def reload_if_changed(self) -> bool:
        """Load the files again if any changed; True when a new pair or bundle is in use.

        Raises CertificateError when the files changed but cannot be loaded; what was loaded
        before stays in use and the next call tries again.
        """
        signature = _signature(self._paths)
        if signature == self._signature:
            return False
        loaded = self._load()
        self._signature = signature
        return loaded
