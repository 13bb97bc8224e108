#!/usr/bin/env bash
# CI for the Python package: build and install it from source into a fresh virtual
# environment exactly as a user would (`pip install ./leankv-py`, which fetches maturin from
# PyPI with build isolation and compiles the crate), then run its pytest suite against the
# installed package. Needs a Rust toolchain and python3 (>= 3.9); run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-python3}"
venv="leankv-py/target/ci-venv"
rm -rf "$venv"
mkdir -p leankv-py/target
"$python" -m venv "$venv"
# The cargo build below reuses leankv-py/target between runs; the venv is always new.
start=$SECONDS
"$venv/bin/python" -m pip install ./leankv-py pytest
echo "leankv-py/ci.sh: pip install took $((SECONDS - start)) s"
# From the tests' directory: python/ is not on the path, so the installed package is tested.
cd leankv-py/tests
"../target/ci-venv/bin/python" -m pytest -q -p no:cacheprovider .
