#!/usr/bin/env bash
# One short check on a GPU machine (run by hand through the device tool; not part of CI):
# NVML and nvidia-smi detection, `fdl diagnose`, the fatbin reader on the CUDA libraries of
# the machine's torch, and adopting that torch's libtorch as a variant. Writes to $OUT.
set -uo pipefail
export PYTHONPATH=$PWD FDL_HOME=/tmp/fdl-home FDL_CACHE_DIR=/tmp/fdl-cache NO_COLOR=1 PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}; mkdir -p "$out"
py=python3
echo "== nvidia-smi"; nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
echo "== fdl"; $py -m fdl --version
echo "== diagnose --json"; $py -m fdl diagnose --json > "$out/diagnose.json"; echo "exit $?"
$py - "$out/diagnose.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("cuda.devices:", json.dumps(d.get("cuda", {}).get("devices")))
print("cuda.driver:", d.get("cuda", {}).get("driver"))
print("gpus:", json.dumps(d.get("gpus"))[:600])
PY
echo "== diagnose (text)"; $py -m fdl diagnose 2>&1 | head -40
torch_dir=$($py -c "import torch, os; print(os.path.dirname(torch.__file__))")
echo "== torch at $torch_dir"; $py -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_arch_list(), torch.cuda.get_device_capability())"
echo "== fatbin reader on torch's CUDA libraries"
$py - "$torch_dir/lib" <<'PY'
import sys, time
from pathlib import Path
from fdl.binaries.fatbin import read_device_code
for lib in sorted(set(Path(sys.argv[1]).glob("lib*cuda*.so*"))):
    t = time.perf_counter()
    try:
        code = read_device_code(lib)
    except Exception as exc:
        print(f"{lib.name}: {type(exc).__name__}: {exc}"); continue
    print(f"{lib.name} ({lib.stat().st_size/2**20:.0f} MiB, {time.perf_counter()-t:.2f} s): "
          f"{code.summary()[:300]}")
PY
echo "== adopt it as a variant (fdl libtorch install --from-dir), then info and diagnose"
mkdir -p /tmp/lt && cp -r "$torch_dir/lib" "$torch_dir/include" "$torch_dir/share" /tmp/lt/ 2>/dev/null
$py -c "import torch; print(torch.__version__)" > /tmp/lt/build-version
timeout 240 $py -m fdl libtorch install --from-dir /tmp/lt --name torch-machine 2>&1 | tail -8
$py -m fdl libtorch info --json > "$out/info.json" 2>&1; head -c 1500 "$out/info.json"; echo
$py -m fdl diagnose 2>&1 | head -30
