#!/usr/bin/env bash
# Checks deploy/ as far as a machine without a container engine allows:
# the systemd unit with `systemd-analyze verify` (where it runs), and the
# Containerfile's build stages run as a script, into a temporary prefix,
# then the binary they installed started, asked for /livez at its admin
# address, and probed as the image's HEALTHCHECK probes it.
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

# The Containerfile's build stages, run as written: each stage in a
# directory of its own (its WORKDIR), a stage FROM another a copy of it;
# `COPY . .` copies the build context (the files git knows, untracked ones
# too, less what it ignores), `COPY --from=STAGE` a file of that stage, and
# RUN runs in the stage's directory with /usr/local/bin a temporary
# prefix and cargo's installs under it. The stages share the checkout's
# target/ (a dependency built once serves every build here). The image's
# last stage, which only copies the binary, is not run.
prefix=$(mktemp -d)
stages=$(mktemp -d)
export CARGO_INSTALL_ROOT="$prefix/cargo" PATH="$prefix/cargo/bin:$PATH"
stage=
while IFS= read -r line; do
  case $line in
    "FROM "*" AS "*)
      read -r _ base _ name <<<"$line"
      mkdir -p "$stages/$name"
      [ -d "$stages/$base" ] && cp -a "$stages/$base/." "$stages/$name/"
      stage="$stages/$name"
      [ -e "$stage/target" ] || ln -s "$PWD/target" "$stage/target"
      ;;
    "FROM "*) break ;;
    "COPY . ."*)
      git ls-files -z --cached --others --exclude-standard | tar -cf - --null -T - | tar -xf - -C "$stage"
      ;;
    "COPY --from="*)
      read -r _ from source dest <<<"$line"
      from=${from#--from=}
      cp "$stages/$from/${source#/src/}" "$stage/$dest"
      ;;
    "RUN "*)
      run=${line#RUN }
      run=${run//\/usr\/local\/bin/$prefix}
      run=$(with_profile "$run")
      echo "deploy: $run"
      (cd "$stage" && bash -c "$run")
      ;;
  esac
done <deploy/Containerfile
rm -rf "$stages"
"$prefix/unflat-server" --addr 127.0.0.1:0 --admin-addr 127.0.0.1:0 --workers 1 \
  >/dev/null 2>"$prefix/log" &
pid=$!
for _ in $(seq 100); do
  grep -q 'admin=' "$prefix/log" && break
  sleep 0.1
done
admin=$(grep -o 'admin=127.0.0.1:[0-9]*' "$prefix/log" | head -1)
admin="http://${admin#admin=}"
status=$(curl -s -o /dev/null -w '%{http_code}' "$admin/livez")
# The HEALTHCHECK's command, at this server's admin address: it passes
# while the server answers, and fails once it has stopped.
probe=$(grep '^HEALTHCHECK' deploy/Containerfile | grep -o '"--probe", "[^"]*"' | sed 's/.*"\(http[^"]*\)"/\1/')
probe=${probe/http:\/\/127.0.0.1:9100/$admin}
up=0
"$prefix/unflat-server" --probe "$probe" || up=$?
kill -TERM "$pid"
wait "$pid"
down=0
"$prefix/unflat-server" --probe "$probe" 2>/dev/null || down=$?
rm -rf "$prefix"
[ "$status" = 200 ] || { echo "deploy: /livez answered $status" >&2; exit 1; }
[ "$up" = 0 ] || { echo "deploy: the HEALTHCHECK failed ($probe) on a running server" >&2; exit 1; }
[ "$down" = 1 ] || { echo "deploy: the HEALTHCHECK passed ($probe) with the server stopped" >&2; exit 1; }
echo "deploy: the Containerfile's stages ran (the dependencies cooked apart from the sources), its binary answered /livez at its admin address, and its HEALTHCHECK passed, then failed once the server stopped"
