#!/usr/bin/env bash
# Runs every speed and memory comparison of issue 6 and writes its sections
# of BENCHMARKS.md: bench/sections/run.md (ralsh against the providers and
# the system tools, start-up floor, cold cache, peak memory) and, where
# Puppet is installed, bench/sections/run_puppet.md (bench/report.py
# formats them, bench/assemble.py rebuilds BENCHMARKS.md).
#
# Builds the release binaries, generates synthetic providers in a scratch
# directory, times each pair of commands with hyperfine (median of at least
# 20 runs, in the same run so the ratio is fair) and measures peak memory
# with /usr/bin/time. Installs hyperfine and time from the distribution when
# missing; compares with Puppet only where `puppet` is installed
# (apt-get install puppet). Nothing outside the scratch directory changes,
# except the package lists apt-get reads when it installs the tools.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT_DIR=$PWD
RUNS=${RUNS:-20}
# Taken now: the date, commit, machine and load average of this run.
HEADER=$(python3 bench/section.py header bench/run.sh)

need() { # need COMMAND PACKAGE
  command -v "$1" >/dev/null && return
  echo "bench: installing $2" >&2
  apt-get install -y -qq "$2" >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null && apt-get install -y -qq "$2" >/dev/null; }
}
need hyperfine hyperfine
[ -x /usr/bin/time ] || need /usr/bin/time time

cargo build --release --quiet
RALSH=$ROOT_DIR/target/release/ralsh
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export XDG_CACHE_HOME=$W/cache
mkdir -p "$W/results"

# hyperfine NAME COMMAND... : one comparison, exported for the report.
bench() {
  local name=$1; shift
  hyperfine --style none --warmup "${WARMUP:-3}" --runs "$RUNS" --export-json "$W/results/$name.json" "$@" >/dev/null
}
# peak_kb NAME COMMAND : peak resident memory of one run, in KiB.
peak_kb() {
  local name=$1; shift
  /usr/bin/time -f %M -o "$W/results/$name.mem" bash -c "$*" >/dev/null 2>&1 || true
}

# 1. ralsh TYPE NAME against the provider's own find (bash, with a .yaml),
#    and against its floor: that find plus one process start (/bin/true),
#    all three timed in the same run.
mkdir -p "$W/find/providers"
cat > "$W/find/providers/kv.prov" <<'EOF'
#!/bin/bash
case "$1" in
ral_action=list) printf '# simple\nname: a\nvalue: 1\n' ;;
ral_action=find) printf '# simple\nname: %s\nvalue: 1\n' "${2#name=}" ;;
esac
EOF
printf -- '---\nprovider:\n  type: kv\n  invoke: simple\n  actions: [list, find]\n  suitable: true\n  desc: bench\n  attributes:\n    name: {}\n    value: {}\n' > "$W/find/providers/kv.yaml"
chmod +x "$W/find/providers/kv.prov"
"$RALSH" -I "$W/find" kv a >/dev/null
bench find -N \
  -n "provider find" "$W/find/providers/kv.prov ral_action=find name=a" \
  -n "ralsh kv a" "$RALSH -I $W/find kv a" \
  -n "true" "/bin/true"
#    The floor under that ratio, timed alike: starting a process at all,
#    and starting ralsh to do nothing.
#    And a Rust program that only prints a line, built like ralsh (release,
#    fat LTO, one codegen unit, stripped): what starting any dynamically
#    linked Rust program costs here, before ralsh does anything.
mkdir -p "$W/hello/src"
printf '[package]\nname = "hello"\nversion = "0.1.0"\nedition = "2021"\n[profile.release]\nlto = "fat"\ncodegen-units = 1\nstrip = true\n' > "$W/hello/Cargo.toml"
echo 'fn main() { println!("hello 0.1.0"); }' > "$W/hello/src/main.rs"
CARGO_TARGET_DIR="$W/hello/target" cargo build --quiet --release --manifest-path "$W/hello/Cargo.toml"
bench floor -N \
  -n "true" "/bin/true" \
  -n "ralsh --version" "$RALSH --version" \
  -n "a Rust hello world" "$W/hello/target/release/hello"

# 2. ralsh (list providers) with 200 describe-only providers against 200
#    with a .yaml; warm cache, then cold.
mkdir -p "$W/described/providers" "$W/yamled/providers"
for i in $(seq 1 200); do
  meta="---\nprovider:\n  type: t$i\n  invoke: simple\n  actions: [list]\n  suitable: true\n  desc: bench $i\n  attributes:\n    name: {}\n"
  printf '#!/bin/sh\n[ "$1" = ral_action=describe ] && printf -- "%s"\nexit 0\n' "$meta" > "$W/described/providers/p$i.prov"
  printf '#!/bin/sh\nexit 0\n' > "$W/yamled/providers/p$i.prov"
  printf -- "$meta" > "$W/yamled/providers/p$i.yaml"
done
chmod +x "$W"/described/providers/*.prov "$W"/yamled/providers/*.prov
"$RALSH" -I "$W/described" >/dev/null
bench providers_warm -N \
  -n "200 .yaml providers" "$RALSH -I $W/yamled" \
  -n "200 described, cache warm" "$RALSH -I $W/described"
bench providers_cold \
  -n "200 described, cache cold" --prepare "rm -rf $XDG_CACHE_HOME/ral/metadata" "$RALSH -I $W/described"

# 3. ralsh -j for 1,000,000 resources of three attributes against cat.
mkdir -p "$W/many"
echo 1000000 > "$W/many/count"
MANY=$ROOT_DIR/bench/providers/many.prov
bench million \
  -n "provider | cat" "RALSH_ROOT_DIR=$W/many $MANY ral_action=list | cat > /dev/null" \
  -n "ralsh -j many" "$RALSH -I $ROOT_DIR/bench --root $W/many -j many > /dev/null"
peak_kb million_ralsh "$RALSH -I $ROOT_DIR/bench --root $W/many -j many"

# 4. users and packages: ralsh against getent and dpkg-query, and Puppet.
bench users -N \
  -n "getent passwd" "getent passwd" \
  -n "ralsh user" "$RALSH user"
peak_kb users_ralsh "$RALSH user"
bench packages -N \
  -n "dpkg-query -W" "dpkg-query -W" \
  -n "ralsh package" "$RALSH package"
peak_kb packages_ralsh "$RALSH package"
if command -v puppet >/dev/null; then
  WARMUP=1 bench puppet_users -N \
    -n "puppet resource user" "puppet resource user" \
    -n "ralsh user" "$RALSH user"
  peak_kb users_puppet "puppet resource user"
  # Puppet 7 may fail after listing (an error from one of its package
  # providers); it is timed anyway, which can only favour it.
  WARMUP=1 bench puppet_packages -N --ignore-failure \
    -n "puppet resource package" "puppet resource package" \
    -n "ralsh package" "$RALSH package"
  peak_kb packages_puppet "puppet resource package"
fi

# The parsers and writers alone are bench/criterion.py's.
python3 "$ROOT_DIR/bench/report.py" "$W/results" "$HEADER"
