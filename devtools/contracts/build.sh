#!/usr/bin/env bash
# Rebuild the test contract artifacts (<Name>.json: abi + bytecode) from the Solidity sources.
# The artifacts are committed so that tests and the demo never need a compiler; run this only
# after editing a .sol file. Needs node and npm; installs solc into a scratch directory.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
SOLC_VERSION="${SOLC_VERSION:-0.8.28}"
WORK="${SOLC_DIR:-/tmp/solc-$SOLC_VERSION}"
mkdir -p "$WORK"
if [ ! -x "$WORK/node_modules/.bin/solcjs" ]; then
  (cd "$WORK" && npm install --silent --no-audit --no-fund "solc@$SOLC_VERSION" >/dev/null)
fi
python3 - "$HERE" "$WORK/node_modules/.bin/solcjs" <<'PY'
import json, pathlib, subprocess, sys

here, solcjs = pathlib.Path(sys.argv[1]), sys.argv[2]
sources = {p.name: {"content": p.read_text()} for p in sorted(here.glob("*.sol"))}
request = {
    "language": "Solidity",
    "sources": sources,
    "settings": {
        "optimizer": {"enabled": True, "runs": 200},
        "evmVersion": "paris",
        "outputSelection": {"*": {"*": ["abi", "evm.bytecode.object"]}},
    },
}
out = subprocess.run(
    [solcjs, "--standard-json"], input=json.dumps(request), capture_output=True, text=True,
    check=True,
).stdout
# solcjs prints ">>> Cannot retry compilation with SMT ..." before the JSON document.
out = out[out.index("{"):]
result = json.loads(out)
errors = [e for e in result.get("errors", []) if e["severity"] == "error"]
if errors:
    sys.exit("\n".join(e["formattedMessage"] for e in errors))
for file_name, contracts in result["contracts"].items():
    for name, c in contracts.items():
        artifact = {
            "contractName": name,
            "source": file_name,
            "abi": c["abi"],
            "bytecode": "0x" + c["evm"]["bytecode"]["object"],
        }
        (here / f"{name}.json").write_text(json.dumps(artifact, indent=1) + "\n")
        print(f"wrote {name}.json")
PY
