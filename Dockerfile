# gpulint's admission webhook: `gpulint serve` on a slim Python, as a non-root user, on a
# read-only root filesystem (deploy/base/deployment.yaml sets readOnlyRootFilesystem: true).
#   docker build -t gpulint .

FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY gpulint/ gpulint/
COPY rules/ rules/
COPY webhook/ webhook/
# The runtime: gpulint with the webhook extra only (no test or lint tools). pip compiles the
# bytecode here, so nothing is written at run time; pip itself then leaves the virtualenv.
RUN python -m venv /opt/gpulint \
 && /opt/gpulint/bin/pip install ".[webhook]" \
 && /opt/gpulint/bin/pip uninstall -y -q pip

FROM python:3.11-slim-bookworm
ENV PATH=/opt/gpulint/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONFAULTHANDLER=1
COPY --from=build /opt/gpulint /opt/gpulint
# 65532: a numeric user with no home and no shell, matching runAsUser in the Deployment.
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["gpulint", "serve"]
CMD ["--tls-cert=/etc/gpulint/tls/tls.crt", "--tls-key=/etc/gpulint/tls/tls.key"]
