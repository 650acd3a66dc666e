#!/usr/bin/env bash
# The comparison behind docs/benchmarks.md: rapid-mlx against mlx_lm.server, alternating
# (A = mlx_lm.server, B = rapid-mlx; ratios are rapid-mlx / mlx_lm.server), two rounds each.
#   bash docs/bench-vs-mlx-lm.sh [WORK_DIR] [SIZE]      (defaults: /tmp/rapidmlx-bench, small)
#   WORKLOADS="agent restart" bash docs/bench-vs-mlx-lm.sh
#   (a subset of: agent burst engine restart crash evict writecost tools kv hybrid)
set -euo pipefail
WORKLOADS=${WORKLOADS:-agent burst engine restart crash evict writecost tools kv hybrid}
want() { [[ " $WORKLOADS " == *" $1 "* ]]; }
WORK=${1:-/tmp/rapidmlx-bench}
SIZE=${2:-small}
OPENBLAS=/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3
if [ -e "$OPENBLAS" ]; then export LD_PRELOAD="$OPENBLAS"; fi  # both servers inherit it
mkdir -p "$WORK"
MODEL="$WORK/model-$SIZE"
DEMO=$(python -c "from router.cli import demo_model_path; print(demo_model_path())")
rapid-mlx bench make-model --arch qwen3 --size "$SIZE" --out "$MODEL"

# Both servers at mlx_lm.server's defaults for batch width (32) and prefill step (2048);
# "default_model" is the name mlx_lm.server answers to, so rapid-mlx gets it as an alias.
# Every phase starts a fresh server, and here, as mlx_lm.server does, with an empty cache: the
# disk tier (which would carry entries from one phase to the next) is off except where the
# runs below measure it.
rapid_config() {  # NAME [extra lines for models.bench]; CONCURRENCY=N for another max_concurrency
    cat > "$WORK/$1.toml" <<TOML
[server]
runtime_dir = "$WORK/run"
offline = true
log_level = "warning"
[models.bench]
path = "$MODEL"
aliases = ["default_model"]
max_concurrency = ${CONCURRENCY:-32}
prefill_step = 2048
${2:-prefix_cache = { persist = false \}}
TOML
}
rapid_config rapid
rapid_config rapid-disk "prefix_cache = { dir = \"$WORK/prefix-cache\" }"
rapid_config rapid-nocache "prefix_cache = { enabled = false }"
# Room for about one entry of the session's length in memory: the other session's turn evicts it to disk.
rapid_config rapid-evict "prefix_cache = { memory_gb = 0.08, dir = \"$WORK/prefix-cache-evict\" }"
cat > "$WORK/rapid-demo.toml" <<TOML
[server]
runtime_dir = "$WORK/run"
offline = true
log_level = "warning"
[models.demo]
path = "$DEMO"
aliases = ["default_model"]
chat_template_kwargs = { enable_thinking = false }
TOML

# mlx_lm.server as shipped, but with a listen backlog that holds a burst (router/bench/mlx_lm_server.py).
MLX_SERVER="env HF_HUB_CACHE=$WORK/hf python -m router.bench.mlx_lm_server"
MLX="$MLX_SERVER --model $MODEL --port {port}"
RAPID="rapid-mlx serve --config $WORK/rapid.toml --port {port}"
BASE=(--model default_model --rounds 2 --tokenizer "$MODEL")
COMMON=("${BASE[@]}" --labels mlx_lm.server,rapid-mlx)

want agent && rapid-mlx bench agent "${COMMON[@]}" --sessions 1,4 --turns 6 --profile small --out "$WORK/agent" --compare "$MLX" "$RAPID"
want burst && rapid-mlx bench burst "${COMMON[@]}" --n 1,8,32 --ignore-eos --out "$WORK/burst" --compare "$MLX" "$RAPID"
# The engine at its limit: bursts of up to 64 with room for all of them decoding at once on both
# servers, then the same bursts in process (the scheduler against mlx-lm's BatchGenerator alone).
if want engine; then
    CONCURRENCY=64 rapid_config rapid-wide
    rapid-mlx bench burst "${COMMON[@]}" --n 8,32,64 --ignore-eos --out "$WORK/engine-http" --compare \
        "$MLX_SERVER --model $MODEL --decode-concurrency 64 --port {port}" "rapid-mlx serve --config $WORK/rapid-wide.toml --port {port}"
    rapid-mlx bench engine-burst --model-dir "$MODEL" --n 8,32,64 --prompt-tokens 200 --max-tokens 128 --concurrency 64 --out "$WORK/engine-in-process"
fi
RAPID_DISK="rapid-mlx serve --config $WORK/rapid-disk.toml --port {port}"
# The prefix cache on disk: the turn after a graceful restart, and after a SIGKILL of the server
# and its workers; a turn served from disk after eviction against a cold prefill; the cost of
# writing through on decoding (4 sessions, disk tier off against on).
want restart && rm -rf "$WORK/prefix-cache" && rapid-mlx bench restart "${COMMON[@]}" --profile small --out "$WORK/restart" --compare "$MLX" "$RAPID_DISK"
want crash && rm -rf "$WORK/prefix-cache" && rapid-mlx bench restart "${COMMON[@]}" --kill --profile small --out "$WORK/crash" --compare "$MLX" "$RAPID_DISK"
want evict && rm -rf "$WORK/prefix-cache-evict" && rapid-mlx bench agent "${BASE[@]}" --labels cold-prefill,from-disk --sessions 2 --turns 4 \
    --profile small --tool-time 0 --out "$WORK/evict" --compare "rapid-mlx serve --config $WORK/rapid-nocache.toml --port {port}" \
    "rapid-mlx serve --config $WORK/rapid-evict.toml --port {port}"
want writecost && rapid-mlx bench disk-tier --model-dir "$MODEL" --entries 16 --tokens 4096 --dir "$WORK" --out "$WORK/disk-tier"
want writecost && rm -rf "$WORK/prefix-cache" && rapid-mlx bench agent "${BASE[@]}" --labels memory-only,write-through --sessions 4 --turns 4 \
    --profile small --out "$WORK/writecost" --compare "$RAPID" "$RAPID_DISK"
# Tool calls need a model that makes them: the demo model, thinking off on both sides.
want tools && rapid-mlx bench tools --model default_model --rounds 2 --labels mlx_lm.server,rapid-mlx --out "$WORK/tools" --compare \
    "env HF_HUB_CACHE=$WORK/hf python -m mlx_lm server --model $DEMO --chat-template-args '{\"enable_thinking\": false}' --port {port}" \
    "rapid-mlx serve --config $WORK/rapid-demo.toml --port {port}"

# A quantized KV cache (8-bit from the first token; group 32: the bench model's head dimension):
# mlx_lm.server --kv-bits serves one request at a time, rapid-mlx batches; then rapid-mlx
# unquantized (A) against 8-bit (B); then the KV bytes per token and what fits a budget.
if want kv; then
    cp "$WORK/rapid.toml" "$WORK/rapid-kv8.toml"
    printf 'kv_cache = { bits = 8, group_size = 32, quantize_after = 0 }\n' >> "$WORK/rapid-kv8.toml"
    RAPID_KV8="rapid-mlx serve --config $WORK/rapid-kv8.toml --port {port}"
    rapid-mlx bench burst "${BASE[@]}" --labels mlx_lm.server-kv8,rapid-mlx-kv8 --n 8 --ignore-eos --out "$WORK/kv8-vs-mlx" --compare \
        "env HF_HUB_CACHE=$WORK/hf python -m mlx_lm server --model $MODEL --kv-bits 8 --kv-group-size 32 --quantized-kv-start 0 --port {port}" "$RAPID_KV8"
    rapid-mlx bench burst "${BASE[@]}" --labels rapid-mlx,rapid-mlx-kv8 --n 8 --ignore-eos --out "$WORK/kv8-vs-fp" --compare "$RAPID" "$RAPID_KV8"
    rapid-mlx bench kv-memory --model-dir "$MODEL" --group-size 32 --budget-gb 1 --context 32768 --out "$WORK/kv-memory"
fi

# A hybrid model (qwen3_next: gated-delta state + attention) on rapid-mlx, prefix cache off (A) and on (B).
want hybrid || exit 0
HYBRID="$WORK/model-qwen3_next-$SIZE"
rapid-mlx bench make-model --arch qwen3_next --size "$SIZE" --out "$HYBRID"
for cache in on off; do
    enabled=$([ "$cache" = on ] && echo true || echo false)
    cat > "$WORK/rapid-hybrid-$cache.toml" <<TOML
[server]
runtime_dir = "$WORK/run"
offline = true
log_level = "warning"
[models.bench]
path = "$HYBRID"
aliases = ["default_model"]
max_concurrency = 32
prefill_step = 2048
prefix_cache = { enabled = $enabled, persist = false }
TOML
done
rapid-mlx bench agent --model default_model --rounds 2 --tokenizer "$HYBRID" --labels cache-off,cache-on \
    --sessions 1 --turns 6 --profile small --out "$WORK/hybrid" \
    --compare "rapid-mlx serve --config $WORK/rapid-hybrid-off.toml --port {port}" "rapid-mlx serve --config $WORK/rapid-hybrid-on.toml --port {port}"
