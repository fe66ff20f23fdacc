#!/usr/bin/env bash
# rootfs.sh BINARY CONFIG OUT: assemble the image's root filesystem in OUT
# from files of this machine (no base image): the binary, exactly the shared
# libraries it links plus the glibc libraries libnvidia-ml.so.1 links, the
# loader, CA certificates, passwd/group with nonroot (65532), the config.
set -euo pipefail
bin=$1 config=$2 out=$3
multiarch=usr/lib/x86_64-linux-gnu
rm -rf "$out"
mkdir -p "$out/$multiarch" "$out/etc/otelcol-nvml" "$out/etc/ssl/certs" "$out/tmp"
chmod 1777 "$out/tmp"
install -m 0755 "$bin" "$out/otelcol-nvml"

# The loader, at the path the binary names (PT_INTERP).
interp=$(readelf -l "$bin" | sed -n 's/.*\[Requesting program interpreter: \(.*\)\]/\1/p')
[ -n "$interp" ] || { echo "rootfs.sh: $bin names no program interpreter (not dynamically linked?)" >&2; exit 1; }
mkdir -p "$out/$(dirname "$interp")"
install -m 0755 "$(readlink -f "$interp")" "$out$interp"

# Every library the binary links, resolved by the loader, under its soname.
copy_lib() { # soname path
	install -m 0755 "$(readlink -f "$2")" "$out/$multiarch/$1"
}
ldd "$bin" | while read -r name arrow path _; do
	[ "$arrow" = "=>" ] || continue
	[ -n "$path" ] && [ "$path" != "not" ] || { echo "rootfs.sh: $name not found" >&2; exit 1; }
	copy_lib "$name" "$path"
done
# libnvidia-ml.so.1 (mounted by the NVIDIA toolkit, driver libraries only)
# links these glibc libraries by name; since glibc 2.34 they are stubs.
for soname in libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1; do
	# awk reads all of ldconfig's output: an early exit would SIGPIPE
	# ldconfig, and pipefail would fail the build on a host with many libraries.
	path=$(ldconfig -p | awk -v s="$soname" '$1 == s && /x86-64/ && !found {print $NF; found = 1}')
	[ -n "$path" ] || { echo "rootfs.sh: $soname not found" >&2; exit 1; }
	copy_lib "$soname" "$path"
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
