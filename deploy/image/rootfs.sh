#!/usr/bin/env bash
# rootfs.sh BINARY CONFIG OUT [ARCH [REPORT]]: assemble the image's root filesystem in
# OUT from files of this machine (no base image): the binary, exactly the
# shared libraries it links plus the glibc libraries libnvidia-ml.so.1 links,
# the loader, CA certificates, passwd/group with nonroot (65532), the config.
# ARCH is amd64 (the default: this machine's glibc) or arm64 (Debian's cross
# glibc, libc6-dev-arm64-cross, for a binary cross-built with
# aarch64-linux-gnu-gcc). The libraries are found by their sonames
# (readelf's NEEDED, transitively), so a foreign binary needs no loader here.
# REPORT, otelcol-nvml-report for ARCH (static, pure Go), goes beside the
# collector as /otelcol-nvml-report.
set -euo pipefail
bin=$1 config=$2 out=$3 arch=${4:-amd64} report=${5:-}
case $arch in
amd64)
	multiarch=usr/lib/x86_64-linux-gnu machine='Advanced Micro Devices X86-64'
	libdirs=(/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu)
	;;
arm64)
	multiarch=usr/lib/aarch64-linux-gnu machine=AArch64
	libdirs=(/usr/aarch64-linux-gnu/lib)
	;;
*) echo "rootfs.sh: unknown ARCH $arch (amd64, arm64)" >&2; exit 1 ;;
esac
got=$(readelf -h "$bin" | sed -n 's/^ *Machine: *//p')
[ "$got" = "$machine" ] || { echo "rootfs.sh: $bin is for $got, not $arch" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/$multiarch" "$out/etc/otelcol-nvml" "$out/etc/ssl/certs" "$out/tmp"
chmod 1777 "$out/tmp"
install -m 0755 "$bin" "$out/otelcol-nvml"
if [ -n "$report" ]; then
	got=$(readelf -h "$report" | sed -n 's/^ *Machine: *//p')
	[ "$got" = "$machine" ] || { echo "rootfs.sh: $report is for $got, not $arch" >&2; exit 1; }
	install -m 0755 "$report" "$out/otelcol-nvml-report"
fi

# find_lib SONAME: its file among the architecture's library directories.
find_lib() {
	local d
	for d in "${libdirs[@]}"; do
		[ -e "$d/$1" ] && { readlink -f "$d/$1"; return; }
	done
	echo "rootfs.sh: $1 not found in ${libdirs[*]}" >&2
	return 1
}

# The loader, at the path the binary names (PT_INTERP).
interp=$(readelf -l "$bin" | sed -n 's/.*\[Requesting program interpreter: \(.*\)\]/\1/p')
[ -n "$interp" ] || { echo "rootfs.sh: $bin names no program interpreter (not dynamically linked?)" >&2; exit 1; }
mkdir -p "$out/$(dirname "$interp")"
install -m 0755 "$(find_lib "$(basename "$interp")")" "$out$interp"

# Every library the binary links, and those they link, under its soname.
# libnvidia-ml.so.1 (mounted by the NVIDIA toolkit, driver libraries only)
# links libm, libdl, libpthread and librt by name; since glibc 2.34 the last
# three are stubs.
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
mapfile -t todo < <(needed "$bin")
todo+=(libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1)
declare -A done_=()
while [ ${#todo[@]} -gt 0 ]; do
	soname=${todo[0]} todo=("${todo[@]:1}")
	[ -z "${done_[$soname]:-}" ] || continue
	done_[$soname]=1
	[ "$soname" != "$(basename "$interp")" ] || continue
	path=$(find_lib "$soname")
	install -m 0755 "$path" "$out/$multiarch/$soname"
	mapfile -t -O "${#todo[@]}" todo < <(needed "$path")
done

install -m 0644 /etc/ssl/certs/ca-certificates.crt "$out/etc/ssl/certs/ca-certificates.crt"
cat > "$out/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
PASSWD
cat > "$out/etc/group" <<'GROUP'
root:x:0:
nonroot:x:65532:
nogroup:x:65534:
GROUP
# files, then DNS: Go's own resolver handles this without NSS modules.
printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$out/etc/nsswitch.conf"
install -m 0644 "$config" "$out/etc/otelcol-nvml/config.yaml"
