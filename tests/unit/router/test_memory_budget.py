"""The memory budget: per-token KV size from real config.json shapes, a real tiny checkpoint's
estimate, which idle models an eviction plan unloads, and the message when nothing makes room."""

from __future__ import annotations

import json

import pytest

from router.ops.config import load_config_text
from router.ops.memory import GB, MemoryEstimate, Resident, estimate_memory, kv_bytes_per_token, no_room_message, plan_eviction


def llama(**overrides):
    return {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "hidden_size": 64, "torch_dtype": "float16", **overrides}


# 2 layers x (K and V) x 2 KV heads x head_dim 64/4=16 elements.
ELEMENTS = 2 * 2 * 2 * 16


def test_llama_float16_is_two_bytes_per_element_of_k_and_v_per_layer():
    assert kv_bytes_per_token(llama()) == ELEMENTS * 2 == 256


def test_float32_doubles_it():
    assert kv_bytes_per_token(llama(torch_dtype="float32")) == ELEMENTS * 4


def test_head_dim_wins_over_hidden_size_divided_by_heads():
    assert kv_bytes_per_token(llama(head_dim=128)) == 2 * 2 * 2 * 128 * 2


def test_without_kv_heads_every_attention_head_holds_kv():
    config = llama()
    del config["num_key_value_heads"]
    assert kv_bytes_per_token(config) == 2 * 2 * 4 * 16 * 2


def test_a_multimodal_config_is_read_from_its_text_config():
    nested = {"model_type": "llava", "torch_dtype": "float16", "vision_config": {"num_hidden_layers": 40},
              "text_config": {k: v for k, v in llama().items() if k != "torch_dtype"}}
    assert kv_bytes_per_token(nested) == kv_bytes_per_token(llama())


def test_linear_attention_layers_of_a_hybrid_hold_no_per_token_kv():
    hybrid = llama(num_hidden_layers=4, layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"])
    # One full-attention layer out of four: a quarter of a 4-layer model.
    assert kv_bytes_per_token(hybrid) == 1 * 2 * 2 * 16 * 2
    sliding = llama(num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"])
    assert kv_bytes_per_token(sliding) == kv_bytes_per_token(llama())


@pytest.mark.parametrize(("bits", "expected"), [(8, ELEMENTS + ELEMENTS // 64 * 4), (4, ELEMENTS // 2 + ELEMENTS // 64 * 4)])
def test_a_quantized_cache_is_packed_values_plus_a_scale_and_bias_per_group(bits, expected):
    assert kv_bytes_per_token(llama(), bits=bits, group_size=64) == expected
    assert kv_bytes_per_token(llama(), bits=bits, group_size=32) == expected + ELEMENTS // 64 * 4  # twice the groups
    assert kv_bytes_per_token(llama(), bits=bits) < kv_bytes_per_token(llama())


# ---------------------------------------------------------------------------- estimate_memory


def model_config(path, extra: str = ""):
    text = f'[models.m]\npath = "{path}"\npreload = false\n{extra}\n'
    return load_config_text(text, env={}).models["m"]


def test_estimate_on_a_real_checkpoint_counts_weights_kv_at_full_context_and_prefix_cache(tiny_models):
    checkpoint = tiny_models.path("qwen3")
    config = model_config(checkpoint, "max_concurrency = 3\n[models.m.prefix_cache]\nmemory_gb = 0.25")
    estimate = estimate_memory(checkpoint, config, max_context=1000)
    weights = sum(p.stat().st_size for p in checkpoint.glob("*.safetensors"))
    assert weights > 0 and estimate.weights_bytes == weights
    model_json = json.loads((checkpoint / "config.json").read_text())
    # The tiny checkpoint names no dtype: the element size comes from its float32 weights.
    assert "torch_dtype" not in model_json and "dtype" not in model_json
    per_token = kv_bytes_per_token(model_json, dtype_bytes=4)
    assert per_token == 2 * kv_bytes_per_token(model_json) > 0
    assert estimate.kv_bytes == 3 * 1000 * per_token
    assert estimate.prefix_cache_bytes == GB // 4
    assert estimate.configured_bytes == 0
    assert estimate.total_bytes == weights + 3 * 1000 * per_token + GB // 4
    assert estimate.as_dict() == {"total_bytes": estimate.total_bytes, "weights_bytes": weights, "kv_bytes": 3000 * per_token,
                                  "prefix_cache_bytes": GB // 4, "configured_bytes": 0}
    assert "weights" in estimate.describe() and "prefix cache 0.25 GB" in estimate.describe()


def test_a_quantized_kv_cache_lowers_the_estimate(tiny_models):
    checkpoint = tiny_models.path("qwen3")
    full = estimate_memory(checkpoint, model_config(checkpoint), max_context=4096)
    quantized = estimate_memory(checkpoint, model_config(checkpoint, "[models.m.kv_cache]\nbits = 4"), max_context=4096)
    assert quantized.kv_bytes < full.kv_bytes and quantized.weights_bytes == full.weights_bytes


def test_a_kv_window_bounds_the_estimate_to_the_window(tiny_models):
    checkpoint = tiny_models.path("qwen3")
    full = estimate_memory(checkpoint, model_config(checkpoint), max_context=4096)
    windowed = estimate_memory(checkpoint, model_config(checkpoint, "[models.m.kv_cache]\nwindow = 1024"), max_context=4096)
    assert windowed.kv_bytes * 4 == full.kv_bytes
    # A window longer than the context holds the context.
    wide = estimate_memory(checkpoint, model_config(checkpoint, "[models.m.kv_cache]\nwindow = 8192"), max_context=4096)
    assert wide.kv_bytes == full.kv_bytes


def test_a_disabled_prefix_cache_counts_nothing(tiny_models):
    checkpoint = tiny_models.path("qwen3")
    config = model_config(checkpoint, "[models.m.prefix_cache]\nenabled = false\nmemory_gb = 3")
    estimate = estimate_memory(checkpoint, config, max_context=128)
    assert estimate.prefix_cache_bytes == 0
    assert estimate.total_bytes == estimate.weights_bytes + estimate.kv_bytes


def test_memory_gb_replaces_the_estimate(tiny_models):
    checkpoint = tiny_models.path("qwen3")
    estimate = estimate_memory(checkpoint, model_config(checkpoint, "memory_gb = 1.5"), max_context=4096)
    assert estimate.configured_bytes == int(1.5 * GB)
    assert estimate.total_bytes == int(1.5 * GB)
    assert estimate.describe() == "1.50 GB (memory_gb)"


def test_memory_gb_needs_no_checkpoint_files(tmp_path):
    # The operator's number is the estimate: nothing is read (the model may not be downloaded yet).
    estimate = estimate_memory(tmp_path / "missing", model_config(tmp_path / "missing", "memory_gb = 2"), max_context=4096)
    assert estimate.total_bytes == 2 * GB


# ---------------------------------------------------------------------------- plan_eviction


def idle(model_id: str, size_gb: float, last_used: float) -> Resident:
    return Resident(model_id, int(size_gb * GB), last_used, evictable=True)


def kept(model_id: str, size_gb: float, last_used: float, why: str) -> Resident:
    return Resident(model_id, int(size_gb * GB), last_used, evictable=False, why_kept=why)


def names(plan):
    return None if plan is None else [r.model_id for r in plan]


def test_nothing_is_evicted_when_it_fits_already():
    assert plan_eviction([idle("a", 4, 1.0), idle("b", 4, 2.0)], need=2 * GB, budget=10 * GB) == []
    assert plan_eviction([], need=10 * GB, budget=10 * GB) == []  # exactly the budget fits


def test_least_recently_used_idle_models_go_first_and_only_as_many_as_needed():
    resident = [idle("newest", 3, 30.0), idle("oldest", 3, 10.0), idle("middle", 3, 20.0)]
    # 9 of 10 GB used, 1 free: one 3 GB model makes 4 free, two make 7, all three 10.
    assert names(plan_eviction(resident, need=3 * GB, budget=10 * GB)) == ["oldest"]
    assert names(plan_eviction(resident, need=5 * GB, budget=10 * GB)) == ["oldest", "middle"]
    assert names(plan_eviction(resident, need=10 * GB, budget=10 * GB)) == ["oldest", "middle", "newest"]


def test_pinned_and_busy_models_are_never_evicted():
    resident = [kept("pinned", 4, 1.0, "pinned"), kept("busy", 4, 2.0, "busy"), idle("idle", 1, 99.0)]
    # Free 1 GB; the only evictable model is the most recently used, still it is the one to go.
    assert names(plan_eviction(resident, need=2 * GB, budget=10 * GB)) == ["idle"]


def test_none_when_evicting_every_evictable_model_is_not_enough():
    resident = [kept("pinned", 6, 1.0, "pinned"), idle("idle", 2, 2.0)]
    assert plan_eviction(resident, need=5 * GB, budget=10 * GB) is None  # 2 free, 4 with "idle" gone
    assert names(plan_eviction(resident, need=4 * GB, budget=10 * GB)) == ["idle"]
    assert plan_eviction([idle("a", 1, 1.0)], need=11 * GB, budget=10 * GB) is None


# ---------------------------------------------------------------------------- no_room_message


def test_no_room_message_names_the_model_the_budget_and_why_each_resident_is_kept():
    resident = [kept("big", 6, 1.0, "pinned"), kept("chat", 3, 2.0, "busy"), idle("spare", 0.5, 3.0)]
    estimate = MemoryEstimate(weights_bytes=4 * GB, kv_bytes=GB, prefix_cache_bytes=GB // 2)
    message = no_room_message("coder", estimate, 8 * GB, resident)
    assert "'coder'" in message
    assert "5.50 GB" in message  # what it needs
    assert "memory_budget_gb is 8.00 GB" in message
    assert "big (6.00 GB, pinned)" in message
    assert "chat (3.00 GB, busy)" in message
    assert "spare (0.50 GB, idle)" in message


def test_no_room_message_with_nothing_resident_and_an_operator_size():
    message = no_room_message("huge", MemoryEstimate(configured_bytes=20 * GB), 8 * GB, [])
    assert "'huge'" in message and "20.00 GB (memory_gb)" in message and "resident: nothing" in message
