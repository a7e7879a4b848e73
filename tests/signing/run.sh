#!/bin/sh
# The signing suite: tensorgate sign | verify against an independent signer and
# verifier of the OpenSSF model-signing format (tests/signing/msig_ref.py, written
# with Debian's python3-cryptography from the format's description).
# usage: tests/signing/run.sh path/to/tensorgate
set -eu
cd "$(dirname "$0")/../.."
exec /usr/bin/python3 tests/signing/test_signing.py "${1:-build/tensorgate}"
