#!/bin/sh
# After the files are removed (dpkg postrm, rpm %postun): systemd forgets
# the unit.
set -e
[ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ] || exit 0
systemctl daemon-reload || :
