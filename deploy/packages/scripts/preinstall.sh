#!/bin/sh
# Before the files are unpacked (dpkg preinst, rpm %pre): the otelcol-nvml
# system user and group, which the unit runs as. Kept on removal (its uid
# may own files elsewhere). Under dpkg --root with
# --force-script-chrootless, DPKG_ROOT is the root being installed into.
set -e
user=otelcol-nvml
root=${DPKG_ROOT:-}

if [ -n "$root" ]; then
	grep -q "^$user:" "$root/etc/passwd" 2>/dev/null && exit 0
	set -- --prefix "$root"
else
	getent passwd "$user" >/dev/null && exit 0
	set --
fi
useradd "$@" --system --user-group --no-create-home --home-dir /nonexistent \
	--shell /usr/sbin/nologin --comment "otelcol-nvml GPU metrics collector" "$user"
