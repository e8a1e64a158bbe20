#!/usr/bin/env bash
# Builds the example image with no registry at all (an air-gapped machine, a
# CI runner without pulls): a root filesystem holding a static whimbrel-run,
# Debian's static busybox (sh and the usual tools, from busybox-static) and
# the activity's script, given to docker import with the same ENTRYPOINT and
# CMD as the Dockerfile beside it.
#
#   examples/docker/build-rootfs.sh [TAG]     (default whimbrel-example-etl:latest)
#
# Needs go, docker and /bin/busybox (apt-get install busybox-static). With a
# registry, the Dockerfile is the usual way.
set -euo pipefail
cd "$(dirname "$0")/../.."
tag=${1:-whimbrel-example-etl:latest}
busybox=${BUSYBOX:-/bin/busybox}
[ -x "$busybox" ] || { echo "build-rootfs: $busybox not found (apt-get install busybox-static)" >&2; exit 1; }

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/bin "$root"/usr/local/bin "$root"/app "$root"/tmp "$root"/etc/ssl/certs "$root"/proc "$root"/sys "$root"/dev
chmod 1777 "$root/tmp"
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$root/usr/local/bin/whimbrel-run" ./cmd/whimbrel-run
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
	[ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done
install -m 755 examples/docker/etl.sh "$root/app/etl.sh"
# CA certificates, for HTTPS to DynamoDB in AWS.
[ ! -f /etc/ssl/certs/ca-certificates.crt ] || cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
echo 'root:x:0:0:root:/:/bin/sh' >"$root/etc/passwd"

tar -C "$root" -c . | docker import \
	--change 'ENTRYPOINT ["/usr/local/bin/whimbrel-run", "--"]' \
	--change 'CMD ["/app/etl.sh"]' \
	--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
	- "$tag" >/dev/null
echo "build-rootfs: built $tag" >&2
