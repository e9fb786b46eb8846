"""Hostile certificate files for ``gpulint serve``: FIFOs, devices, directories, huge files and
encrypted keys are start-up errors that say what is wrong (never a hang or a pass-phrase
prompt), and a reload that meets one keeps the pair in use.
"""

from __future__ import annotations

import os
import pty
import select
import sys
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from . import objects
from .harness import Certificates, Webhook, admission_review, running


def _exits_2(hook: Webhook, message: str) -> None:
    assert hook.process.wait(15) == 2
    hook.stop()
    assert message in hook.log_text(), hook.log_text()


def test_a_fifo_as_the_certificate_is_an_error_not_a_hang(
    certificates: Certificates, tmp_path: Path
) -> None:
    fifo = tmp_path / "cert.fifo"
    os.mkfifo(fifo)
    args = ["--no-cluster", f"--tls-cert={fifo}"]
    hook = Webhook(certificates, tmp_path / "serve.log", args, wait=False)
    _exits_2(hook, f"the certificate {fifo} is not a regular file (a FIFO)")


@pytest.mark.parametrize(
    ("path", "kind"), [("/dev/zero", "a character device"), ("/", "a directory")]
)
def test_a_device_or_directory_as_the_key_is_an_error(
    certificates: Certificates, tmp_path: Path, path: str, kind: str
) -> None:
    hook = Webhook(
        certificates, tmp_path / "serve.log", ["--no-cluster", f"--tls-key={path}"], wait=False
    )
    _exits_2(hook, f"the key {path} is not a regular file ({kind})")


def test_an_oversized_certificate_file_is_an_error(
    certificates: Certificates, tmp_path: Path
) -> None:
    big = tmp_path / "big.pem"
    big.write_bytes(certificates.cert.read_bytes() * 2_000)
    hook = Webhook(
        certificates, tmp_path / "serve.log", ["--no-cluster", f"--tls-cert={big}"], wait=False
    )
    _exits_2(hook, f"the certificate {big} is larger than 1 MiB")


def _encrypt(key: Path) -> None:
    loaded = serialization.load_pem_private_key(key.read_bytes(), password=None)
    key.write_bytes(
        loaded.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pass phrase"),
        )
    )


ENCRYPTED = "the private key is encrypted with a pass phrase, which gpulint serve cannot be given"


def test_an_encrypted_key_is_an_error_even_on_a_terminal(
    certificates: Certificates, tmp_path: Path
) -> None:
    """On a terminal OpenSSL would ask for the pass phrase and wait: gpulint says what is
    wrong and exits."""
    _encrypt(certificates.key)
    args = [
        sys.executable,
        "-m",
        "gpulint",
        "serve",
        f"--tls-cert={certificates.cert}",
        f"--tls-key={certificates.key}",
        "--port=1",
        "--no-cluster",
    ]
    pid, fd = pty.fork()
    if pid == 0:  # the child: gpulint serve with the pty as its controlling terminal
        os.execv(sys.executable, args)
    output = b""
    ended = time.monotonic() + 20
    while time.monotonic() < ended:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child has closed the terminal
            break
        if not chunk:
            break
        output += chunk
    done, status = os.waitpid(pid, os.WNOHANG)
    while not done and time.monotonic() < ended:  # it closed the terminal: it is exiting
        time.sleep(0.05)
        done, status = os.waitpid(pid, os.WNOHANG)
    if not done:  # still waiting for someone to type
        os.kill(pid, 9)
        _, status = os.waitpid(pid, 0)
    os.close(fd)
    text = output.decode(errors="replace")
    assert done, f"gpulint serve was still running after 20 s:\n{text}"
    assert "pass phrase:" not in text.lower()
    assert os.waitstatus_to_exitcode(status) == 2, text
    assert ENCRYPTED in " ".join(text.split())


@pytest.mark.slow
def test_reloading_keeps_the_old_pair_when_the_files_turn_hostile(
    certificates: Certificates, tmp_path: Path
) -> None:
    with running(
        certificates, tmp_path / "serve.log", ["--no-cluster", "--tls-check-interval=0.1"]
    ) as hook:
        fifo = tmp_path / "swap.fifo"
        os.mkfifo(fifo)
        good_cert = certificates.cert.read_bytes()
        os.replace(fifo, certificates.cert)  # as a Secret volume swaps files in
        time.sleep(0.6)
        assert hook.get("/healthz", timeout=3) == (200, {"ok": True})
        certificates.cert.unlink()
        certificates.cert.write_bytes(good_cert)
        _encrypt(certificates.key)
        time.sleep(0.6)
        assert hook.get("/healthz", timeout=3) == (200, {"ok": True})
        response = hook.review(admission_review(objects.isvc_standard()))
        assert response["allowed"] is True
        failures = [
            r["message"] for r in hook.log_records() if r["event"] == "certificate-reload-failed"
        ]
        metrics = hook.metrics()
    assert any("is not a regular file (a FIFO)" in m for m in failures), failures
    assert any(ENCRYPTED in m for m in failures), failures
    assert metrics.value("gpulint_webhook_certificate_reloads_total", result="ok") == 0
