# Sourced by the script tests: a scratch folder ($work, removed on exit) holding a byte dataset
# prepared from the README ($work/data), the toy data the --dry-run paths train on.
# Needs $root (the project root) and $bin (the roformer binary).
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for s in train valid test; do cat "$root/README.md" "$root/README.md" > "$work/$s.txt"; done
"$bin" prepare-data --input "$work/train.txt" "$work/valid.txt" "$work/test.txt" --tokenizer byte --out "$work/data" > /dev/null
