# The preamble every shell script in scripts/ sources (after its own `set` line):
#   root  the project's root folder (found from this file, so any working directory works)
#   bin   the roformer binary: $ROFORMER_BIN, else the release build's
#   py    the project's Python (.venv/, made by scripts/setup.sh), else python3 on PATH
#   bad   prints "<script>: <message>" on stderr and exits 2 (bad input: the user's to fix)
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${ROFORMER_BIN:-$root/build/release/bin/roformer}"
py="$root/.venv/bin/python"
[ -x "$py" ] || py="$(command -v python3 || echo python3)"
bad() {
  echo "$(basename "$0" .sh): $*" >&2
  exit 2
}
