#!/usr/bin/env bash
# Builds the Dockerfile and runs the image on a machine with no container engine and no access
# to a registry of container images (only Debian's packages and the npm registry):
# - the base image node:24-slim is stood in for by Debian bookworm (debootstrap, minbase) with
#   the Node.js 24 binary of the `node` dev dependency, this machine's npm, and the user `node`
#   (uid 1000) as in the official image; the machine's CA bundle is added so that npm inside
#   the build trusts what the machine trusts;
# - buildah builds the Dockerfile (vfs storage in a temporary directory, chroot isolation: no
#   daemon), so every instruction runs for real, `npm ci --omit=dev` against the registry too;
# - the image's CMD runs in it (buildah run) as the image's user, the volume a temporary
#   directory, on a free port of this machine (chroot isolation shares the host's network);
#   /healthz, /readyz, the image's HEALTHCHECK command, and SIGTERM are checked.
# Exit 0: verified. Exit 2: this machine cannot do it (tools not installable, no chroot): skipped.
# Exit 1: the image is wrong.
set -euo pipefail
cd "$(dirname "$0")/.."

skip() {
  echo "container check skipped: $*"
  exit 2
}
fail() {
  echo "container check FAILED: $*"
  [ -f "${work:-/nonexistent}/service.log" ] && tail -n 20 "$work/service.log"
  exit 1
}

for tool in buildah podman debootstrap; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then skip "$tool is not installed"; fi
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends buildah podman debootstrap \
      >/dev/null 2>&1 || skip "cannot install buildah, podman and debootstrap"
    break
  fi
done
[ "$(id -u)" -eq 0 ] || skip "debootstrap and chroot builds need root"
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
node_bin="$(readlink -f node_modules/.bin/node 2>/dev/null || true)"
[ -x "$node_bin" ] || skip "no node_modules/.bin/node (run npm install first)"
npm_dir="$(npm root -g)/npm"
[ -d "$npm_dir" ] || skip "npm's own directory not found"

work="$(mktemp -d)"
store=(--root "$work/storage" --runroot "$work/run" --storage-driver vfs)
service=""
cleanup() {
  if [ -n "$service" ] && kill -0 "$service" 2>/dev/null; then kill -KILL "$service" 2>/dev/null || true; fi
  buildah "${store[@]}" rm --all >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "-- stand-in base image: Debian bookworm (minbase) with Node.js $("$node_bin" --version)"
debootstrap --variant=minbase bookworm "$work/rootfs" >"$work/debootstrap.log" 2>&1 ||
  skip "debootstrap failed: $(tail -n 1 "$work/debootstrap.log")"
rootfs="$work/rootfs"
install -m 0755 "$node_bin" "$rootfs/usr/local/bin/node"
mkdir -p "$rootfs/usr/local/lib/node_modules"
cp -a "$npm_dir" "$rootfs/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
chroot "$rootfs" groupadd --gid 1000 node
chroot "$rootfs" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
changes=(--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' --change 'CMD ["node"]')
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  mkdir -p "$rootfs/etc/ssl/certs"
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
  changes+=(--change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt')
fi
tar -C "$rootfs" -c . | podman "${store[@]}" import "${changes[@]}" - docker.io/library/node:24-slim >/dev/null 2>&1 ||
  skip "podman import failed"

echo "-- buildah bud (chroot isolation, no daemon)"
buildah "${store[@]}" bud --pull=never --isolation chroot --format docker -t localhost/svc-check . \
  >"$work/build.log" 2>&1 || {
  tail -n 20 "$work/build.log"
  fail "the Dockerfile does not build"
}
grep -E '^\[[0-9]/[0-9]\] STEP' "$work/build.log"

ctr="$(buildah "${store[@]}" from localhost/svc-check)"
buildah "${store[@]}" inspect localhost/svc-check >"$work/image.json"
field() { node -e 'const i = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); for (const a of [].concat(eval(process.argv[2]))) console.log(a)' "$work/image.json" "$1"; }
mapfile -t cmd < <(field 'i.OCIv1.config.Cmd')
# HEALTHCHECK's test is ["CMD", argv...].
mapfile -t health < <(field 'i.Docker.config.Healthcheck.Test.slice(1)')
user="$(field 'i.OCIv1.config.User || ""')"
[ "${#cmd[@]}" -gt 0 ] && [ "${#health[@]}" -gt 0 ] || fail "the image has no CMD or no HEALTHCHECK"
[ -n "$user" ] || fail "the image has no USER: it runs as root"
run() { buildah "${store[@]}" run --isolation chroot --user "$user" "$@"; }

uid="$(run "$ctr" -- id -u)" || fail "cannot run a command as $user in the image"
[ "$uid" != "0" ] || fail "the image runs as root"
if run "$ctr" -- touch /app/written 2>/dev/null; then fail "the image's user can write the code"; fi
if run "$ctr" -- test -e node_modules/typescript 2>/dev/null; then fail "dev dependencies are in the image"; fi
echo "user $user (not root), cannot write /app, no dev dependencies in node_modules"

volume="$work/volume"
mkdir -m 0700 "$volume"
chown 1000:1000 "$volume"
port="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
echo "-- the image's command as $user, volume at /var/lib/svc, port $port: ${cmd[*]}"
run -e PORT="$port" -v "$volume:/var/lib/svc" "$ctr" -- "${cmd[@]}" >"$work/service.log" 2>&1 &
service=$!
for _ in $(seq 1 120); do
  curl -fsS -m 2 "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  kill -0 "$service" 2>/dev/null || fail "the service exited"
  sleep 0.5
done
curl -fsS -m 5 "http://127.0.0.1:$port/healthz" || fail "/healthz does not answer"
echo
curl -fsS -m 5 "http://127.0.0.1:$port/readyz" || fail "/readyz does not answer"
echo
[ -f "$volume/secret.key" ] || fail "the embedded database is not in the volume"
run -e PORT="$port" "$ctr" -- "${health[@]}" || fail "the HEALTHCHECK command fails while the service runs"
echo "HEALTHCHECK command: exit 0"

# SIGTERM to the service's node process (the command's process inside buildah run's tree).
descendants() { for child in $(ps -o pid= --ppid "$1"); do echo "$child"; descendants "$child"; done; }
node_pid=""
for pid in $(descendants "$service"); do
  if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "${cmd[-1]}"; then node_pid="$pid"; fi
done
[ -n "$node_pid" ] || fail "the service's process was not found"
kill -TERM "$node_pid"
code=0
wait "$service" || code=$?
service=""
[ "$code" -eq 0 ] || fail "SIGTERM: exit code $code"
grep -q '"shutting down"' "$work/service.log" || fail "no orderly shutdown on SIGTERM"
echo "SIGTERM: orderly shutdown, exit code 0"
if run -e PORT="$port" "$ctr" -- "${health[@]}" 2>/dev/null; then fail "the HEALTHCHECK command passes with no service"; fi
echo "container check passed"
