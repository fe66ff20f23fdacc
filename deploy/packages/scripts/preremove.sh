#!/bin/sh
# Before the files are removed (dpkg prerm, rpm %preun): on removal, not on
# upgrade, stop and disable the unit.
set -e
[ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ] || exit 0
case "$1" in
remove | 0) systemctl disable --now otelcol-nvml.service || : ;; # dpkg remove; rpm: no version left
esac
