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

# The rules every script follows with the paths it is given (docs/reliability.md):
#   caller        the folder the script was started from; a relative path the user gives means
#                 this folder, whatever folder the script works in later
#   abs_path P    P made absolute against the caller's folder
#   check_out N P P may receive output: not a file, not the checkout or a folder holding its
#                 tracked files (N names the option or variable in the message)
#   check_file_out N P   P may be written as one file: its folder exists, P is not a folder
#   check_owned P P (a folder the script deletes and remakes) is absent or the script's own
#   make_owned P  creates P and records it as the script's (only such folders are ever deleted)
#   remove_owned P       deletes P if the script made it, refuses (exit 2) if it did not
#   check_run P   P is absent or a roformer run or eval folder (train.log, metrics.jsonl,
#                 checkpoints/ or eval.json in it), else exit 2: a script may delete and remake it
#   remove_run P  check_run P, then deletes it
caller="$PWD"
abs_path() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$caller/$1" ;; esac; }
check_out() {
  local name="$1" path
  path="$(abs_path "$2")"
  [ -e "$path" ] && [ ! -d "$path" ] && bad "$name '$2' is a file; name a folder (a new one, or this script's own)"
  local real
  real="$(realpath -m "$path")"
  [ "$real" = "$root" ] && bad "$name '$2' is the checkout itself; name a folder of its own (e.g. sweeps/NAME)"
  if [[ "$real/" == "$root/"* ]] && [ -n "$(git -C "$root" ls-files -- "$real" 2> /dev/null | head -1)" ]; then
    bad "$name '$2' holds files of the checkout; name a folder of its own (e.g. sweeps/NAME)"
  fi
  return 0
}
check_file_out() {
  local name="$1" path
  path="$(abs_path "$2")"
  [ -d "$path" ] && bad "$name '$2' is a folder; name the file to write"
  [ -d "$(dirname "$path")" ] || bad "$name '$2': its folder $(dirname "$path") does not exist"
  return 0
}
owned_mark() { printf '%s\n' "$1/.made-by-$(basename "$0" .sh)"; }
check_owned() {
  [ ! -e "$1" ] || [ -f "$(owned_mark "$1")" ] ||
    bad "$1 exists and was not made by $(basename "$0"), which would delete and remake it; move it or name another folder"
}
make_owned() { mkdir -p "$1" && : > "$(owned_mark "$1")"; }
remove_owned() {
  check_owned "$1"
  rm -rf "$1"
}
check_run() {
  [ -e "$1" ] || return 0
  [ -d "$1" ] && { [ -e "$1/train.log" ] || [ -e "$1/metrics.jsonl" ] || [ -d "$1/checkpoints" ] || [ -e "$1/eval.json" ]; } ||
    bad "$1 is in the way and is not a roformer run, which $(basename "$0") would delete and remake; move it"
}
remove_run() {
  check_run "$1"
  rm -rf "$1"
}
