#!/usr/bin/env bash
# How a report reads, as a person opens it: its height with the folded sections as shipped at 1280 and
# 390 CSS px, the top of #answer, whether it scrolls sideways, ids holding a space, and its size.
#
#   bash benchmarks/report_layout.sh reports/local/report.html [more.html ...]
#
# Headless Chromium opens no window under ~500 px, so each width is an iframe of that width, measured
# by its parent (file:// pages read each other only with --allow-file-access-from-files); the same
# method as tests/e2e/test_report_browser.py. Needs Debian's chromium.
set -euo pipefail
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "report_layout: chromium is not installed (apt-get install -y chromium)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-40s %8s %7s %8s %7s %6s %10s\n' report width height answer_at sideways spaced bytes
for page in "$@"; do
  cp "$page" "$work/page.html"
  for width in 1280 390; do
    cat >"$work/frame.html" <<EOF
<!DOCTYPE html><html><body style="margin:0"><iframe id="f" src="page.html" style="width:${width}px;height:900px;border:0"></iframe>
<script>
document.getElementById('f').addEventListener('load', () => {
  const w = document.getElementById('f').contentWindow, d = w.document, a = d.getElementById('answer');
  document.body.setAttribute('data-layout', [d.documentElement.scrollHeight, a ? Math.round(a.getBoundingClientRect().top) : -1,
    d.documentElement.scrollWidth > w.innerWidth ? 'yes' : 'no', d.querySelectorAll('[id*=" "]').length].join(' '));
});
</script></body></html>
EOF
    out=$(timeout 120 "$browser" --headless --no-sandbox --disable-gpu --allow-file-access-from-files \
      --user-data-dir="$work/profile" --virtual-time-budget=5000 --window-size=$((width + 20)),1000 \
      --dump-dom "file://$work/frame.html" 2>/dev/null | grep -o 'data-layout="[^"]*"' | cut -d'"' -f2)
    read -r height answer sideways spaced <<<"$out"
    printf '%-40s %8s %7s %8s %7s %6s %10s\n' "$(basename "$page")" "$width" "$height" "$answer" "$sideways" \
      "$spaced" "$(stat -c %s "$page")"
  done
done
