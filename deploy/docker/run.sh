#!/bin/sh
# otelcol-nvml on a plain Docker host with the NVIDIA Container Toolkit:
# every GPU, with the image's default config (deploy/image/config.yaml):
# Prometheus metrics on 127.0.0.1:8889, health on 127.0.0.1:13133.
#   --gpus all         the toolkit mounts libnvidia-ml.so.1 (no GPU is taken)
#   --pid host         NVML reports host PIDs; this resolves them
#   --cgroupns host    the containers' cgroups, for container.cpu.time
# It runs as the image's non-root user, read-only, with no capability.
# make test checks this command (test/deploy) and the README quotes it.
exec docker run --detach --name otelcol-nvml --restart unless-stopped \
  --gpus all --pid host --cgroupns host \
  --read-only --cap-drop ALL --security-opt no-new-privileges \
  -e LISTEN_ADDRESS=0.0.0.0 -p 127.0.0.1:8889:8889 -p 127.0.0.1:13133:13133 \
  ghcr.io/otelcol-nvml/otelcol-nvml:0.1.0
