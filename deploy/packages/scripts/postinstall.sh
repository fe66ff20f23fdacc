#!/bin/sh
# After the files are unpacked (dpkg postinst, rpm %post): systemd reads the
# unit; an upgrade restarts a running collector on the new binary. A first
# install enables and starts nothing: the admin does, after reading the
# config (docs/operations/deploy.md, "Bare metal and Slurm").
set -e
# Only where systemd runs, and never into another root (dpkg --root).
[ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ] || exit 0
systemctl daemon-reload || :
case "$1" in
configure) [ -z "${2:-}" ] || systemctl try-restart otelcol-nvml.service || : ;; # dpkg: $2 is the old version on upgrade
[2-9]*) systemctl try-restart otelcol-nvml.service || : ;;                       # rpm: $1 is the count of installed versions
esac
