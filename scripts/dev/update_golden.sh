#!/usr/bin/env bash
# Regenerates tests/golden/tiny_loss_curve.txt from the release build, on purpose: run it when
# a change is meant to move the numbers, and say why in the commit. Usage: scripts/dev/update_golden.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/preamble.sh"
cd "$root"
cmake --build --preset release --target test_integration roformer >/dev/null
ROFORMER_UPDATE_GOLDEN=1 build/release/tests/test_integration --gtest_filter="Golden.*" --gtest_brief=1 | grep -i "wrote" || true
git --no-pager diff --stat -- tests/golden/
