#!/usr/bin/env bash
# Checks deploy/ as far as a machine without a container engine allows:
# the systemd unit with `systemd-analyze verify` (where it runs), and the
# Containerfile's build-stage RUN lines run as a script, into a temporary
# prefix, then the binary they installed started and asked for /healthz.
#
# With UNFLAT_DEPLOY_PROFILE=P (CI: smoke), the builds use the cargo
# profile P for the release profile (`--profile P`, target/P/): the same
# commands, without a fat-LTO build of their own.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=${UNFLAT_DEPLOY_PROFILE:-release}
# `--release` and target/release/ in a command, for the profile used.
with_profile() {
  local line=$1
  if [ "$profile" != release ]; then
    line=${line//--release/--profile $profile}
    line=${line//target\/release\//target\/$profile\/}
  fi
  printf '%s' "$line"
}

if command -v systemd-analyze >/dev/null 2>&1; then
  unit_dir=$(mktemp -d)
  trap 'rm -rf "$unit_dir"' EXIT
  # ExecStart's binary must exist for verify: a stand-in at its path is
  # not possible without root, so the unit is verified with its path
  # pointed at the binary the build below makes.
  sed "s|/usr/local/bin/unflat-server|$PWD/target/$profile/unflat-server|" \
    deploy/unflat-server.service >"$unit_dir/unflat-server.service"
  bash -c "$(with_profile 'cargo build --release --locked -p unflat-server')"
  out=$(systemd-analyze verify "$unit_dir/unflat-server.service" 2>&1 || true)
  # Only lines about the unit itself count (not the host's other units).
  bad=$(printf '%s\n' "$out" | grep -F "unflat-server.service" || true)
  if [ -n "$bad" ]; then
    printf 'systemd-analyze verify:\n%s\n' "$bad" >&2
    exit 1
  fi
  echo "deploy: the systemd unit verifies"
else
  echo "deploy: no systemd-analyze here, the unit is not verified"
fi

# The build stage's RUN lines, in order, with /usr/local/bin moved under a
# temporary prefix.
prefix=$(mktemp -d)
grep '^RUN ' deploy/Containerfile | sed 's/^RUN //' | while IFS= read -r line; do
  line=${line//\/usr\/local\/bin/$prefix}
  line=$(with_profile "$line")
  echo "deploy: $line"
  bash -c "$line"
done
"$prefix/unflat-server" --addr 127.0.0.1:0 --workers 1 >"$prefix/banner" 2>/dev/null &
pid=$!
for _ in $(seq 100); do
  grep -q 'http://' "$prefix/banner" && break
  sleep 0.1
done
url=$(grep -o 'http://127.0.0.1:[0-9]*' "$prefix/banner" | head -1)
status=$(curl -s -o /dev/null -w '%{http_code}' "$url/healthz")
# The HEALTHCHECK's command, at this server's address: it passes while the
# server answers, and fails once it has stopped.
probe=$(grep '^HEALTHCHECK' deploy/Containerfile | grep -o '"--probe", "[^"]*"' | sed 's/.*"\(http[^"]*\)"/\1/')
probe=${probe/http:\/\/127.0.0.1:8080/$url}
up=0
"$prefix/unflat-server" --probe "$probe" || up=$?
kill -TERM "$pid"
wait "$pid"
down=0
"$prefix/unflat-server" --probe "$probe" 2>/dev/null || down=$?
rm -rf "$prefix"
[ "$status" = 200 ] || { echo "deploy: /healthz answered $status" >&2; exit 1; }
[ "$up" = 0 ] || { echo "deploy: the HEALTHCHECK failed ($probe) on a running server" >&2; exit 1; }
[ "$down" = 1 ] || { echo "deploy: the HEALTHCHECK passed ($probe) with the server stopped" >&2; exit 1; }
echo "deploy: the Containerfile's build ran, its binary answered /healthz, and its HEALTHCHECK passed, then failed once the server stopped"
