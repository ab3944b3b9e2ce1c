#!/usr/bin/env bash
# Debian's Chromium for the review app's browser test (tests/review/test_browser.py drives it with
# the playwright package, no browser download). Idempotent; needs root; the test skips, saying so,
# when no chromium is there.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "browser: $(chromium --version 2>/dev/null | head -1)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
echo "browser: installed $(chromium --version 2>/dev/null | head -1)"
