"""Build the bundled demo model from nothing: tokenizer, template, weights, 4-bit copy.

    python -m engines.demo.build --out engines/demo/artifact --quantized-out engines/demo/artifact-q4

Steps, all seeded: render synthetic conversations (``corpus.py``) with the shipped chat
template, train a byte-level BPE on them (``tiny.write_tokenizer``), initialise a small
Qwen3 model and train it on the CPU (``train.py``) with the loss on assistant turns only,
in four stages (warm restarts on fresh conversations follow the first), save it in
mlx-lm's format, quantize a 4-bit copy, and measure it (``evaluate.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import json
import logging
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mlx.core as mx

    from engines.demo.circuit import PointerCues, PointerKeys

logger = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).parent
ARTIFACT_DIR = PACKAGE_DIR / "artifact"
QUANTIZED_DIR = PACKAGE_DIR / "artifact-q4"

# Long enough for agent prompts: Claude Code 2.1's first request (system prompt and 25 tools)
# is 45-50k tokens of this small BPE, over the 40960 the demo had (its CLI refused to start).
# RoPE at base 1e6 keeps positions distinct far beyond the short sequences the model is
# trained on; what it answers to such prompts is another matter (README).
MAX_CONTEXT = 131072
ROPE_THETA = 1_000_000.0


@dataclass(frozen=True)
class Recipe:
    """Everything that shapes the trained weights besides the seed (the shipped build's values)."""

    steps: int = 700
    rows: int = 8  # sequences per batch
    # Data-parallel processes that share each batch's rows (engines/demo/ranks.py). More than
    # one sums the gradient in another order, so the count shapes the weights like any setting.
    ranks: int = 1
    length: int = 512  # tokens per sequence; longer conversations are skipped
    learning_rate: float = 3e-3
    vocab_size: int = 1024
    # The space inside a multi-word name ("Kuala Lumpur") is its own token, joined to the next
    # word's capital (NAME_RUN_PATTERN): a plain space then only ever follows a whole name.
    name_spaces: bool = False
    context_weight: float = 0.1  # loss weight of prompt tokens (assistant tokens weigh 1)
    copy_weight: float = 4.0  # loss weight of tool names and argument values
    decision_weight: float = 4.0  # loss weight of the tokens that open a turn (data.DECISION_TOKENS)
    result_weight: float = 0.0  # loss weight of answer words repeated from a tool result (data.result_spans)
    drill_fraction: float = 0.08  # "repeat after me" conversations
    invented: float = 0.5  # share of made-up tool arguments (corpus.ArgumentSource)
    long_fraction: float = 0.0  # conversations with an agent-style system prompt
    matching_update: float = 0.1  # update scale of the induction head (circuit.update_scales)
    pointer_strength: float = 1.0  # output scale of the pointer head (circuit._pointer_head)
    # The pointer head's random query and key from this seed's draw instead of the model's own
    # (None). Where the pointer starts decides how soon training teaches it where to look; seed
    # 7's draw learned far faster and made another model, not a better one (demo README,
    # "a bigger model and where the pointer starts"), so the shipped build keeps its own.
    pointer_seed: int | None = None
    # Written keys for the pointer head (circuit._pointer_keys). Tried, not shipped: see the
    # demo README's "What was tried"; the next two only apply with them.
    pointer_keys: bool = False
    pointer_random_scale: float = 0.5  # its random query/key start, next to the written keys
    argument_query: float = 1.5  # its written query for a request's argument
    # Stage two: a warm restart (fresh AdamW, a short warmup and a second cosine cycle) on
    # conversations stage one never saw, with more made-up arguments and the answer words
    # repeated from a tool result weighted up. Stage one alone leaves the model
    # undertrained: it called tools but answered with a remembered temperature (demo README).
    restart_steps: int = 500
    restart_learning_rate: float = 1e-3
    restart_result_weight: float = 4.0
    restart_invented: float = 0.8
    # Stage three (issue 21): a copying stage, another warm restart on a stream of made-up
    # arguments (all of them) and a quarter copying drills, nothing beyond the demo. Stages one
    # and two leave a model that recalls its training cities and seldom copies a new name
    # (evaluate.copy_report: fresh invented names 0.15, held-out cities 0.00); this stage
    # teaches copying as such (demo README, "What was tried", third round).
    copy_steps: int = 600
    copy_learning_rate: float = 1e-3
    copy_invented: float = 1.0
    copy_drill_fraction: float = 0.25
    # Share of the made-up cities of stages three and four that start like a training city and
    # go on otherwise (corpus.ArgumentSource.decoy_city).
    copy_decoys: float = 0.0
    # Stage four (issue 21): manners, a last warm restart on a stream where a share of the chat
    # exchanges are greetings in many phrasings and requests beyond the demo answered with
    # what it can do (corpus.chat_exchange's ``beyond``), and each turn's <|im_end|> weighs
    # more. Taught after the copying: before it, these exchanges cost the calls with values it
    # had not seen (it could not tell them from a request beyond it; second round). 800 steps,
    # not 300, bring the calls with seen values back and help the rest (fourth round); 1600
    # end more unseen prompts briefly and copy more new values ("A longer stage four").
    polish_steps: int = 1600
    polish_learning_rate: float = 5e-4
    polish_beyond: float = 0.3
    polish_end_weight: float = 4.0
    polish_invented: float = 0.8
    polish_drill_fraction: float = 0.08
    polish_decoys: float = 0.0
    # Weight of the unlikelihood loss on tokens a turn repeats (train.repeat_penalty) in stage
    # four. Each weight tried (0.25 to 1) made fewer unseen prompts loop, the heavier the fewer;
    # 0.25 is the one that kept the held-out cities (0.80) and every row the model before issue
    # 21 had; 0.5 and up cost calls, 3 also answers (demo README, "unlikelihood on repeated tokens").
    polish_unlikelihood: float = 0.25

    def __post_init__(self) -> None:
        if self.ranks < 1 or self.rows % self.ranks:
            raise ValueError(f"ranks must be a divisor of rows ({self.rows}); got {self.ranks}")
        if self.polish_unlikelihood and self.context_weight >= 1:
            # train.assistant_tokens tells assistant tokens from prompt tokens by a weight of 1 or more.
            raise ValueError("polish_unlikelihood needs prompt tokens to weigh less than 1 (context_weight)")


DEFAULT_STEPS = Recipe.steps
DEFAULT_RESTART_STEPS = Recipe.restart_steps
DEFAULT_COPY_STEPS = Recipe.copy_steps
DEFAULT_POLISH_STEPS = Recipe.polish_steps
RESTART_WARMUP = 10
# Stage three's and four's streams: other seeds', disjoint from the first two and each other.
COPY_STREAM_OFFSET = 203
POLISH_STREAM_OFFSET = 204
# Stage two's conversations come from another seed's stream, disjoint from stage one's
# (seed + 102: of the two streams tried, +101 and +102, the one whose model evaluated
# better; the demo README has both).
RESTART_STREAM_OFFSET = 102
# GPT-2's split regex minus the leading space on letter and digit runs: "in Reykjavik" and
# {"city": "Reykjavik"} then share the tokens of "Reykjavik", so copying a word from the
# request into the JSON arguments (and back into the answer) is an exact token copy.
SPLIT_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d|\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
# With ``Recipe.name_spaces``: capitalised words in a row ("Kuala Lumpur", "Salt Lake City") are
# cut out first, and inside them each space goes with the capital after it (" L", " C"). Copying
# a held-out city used to fail at its inner space: the request's plain space after a one-word
# city ("in Munich today") is the same token, and the model had learned to close the value
# there. Now a plain space never continues a name and " L" always does, in the request and in
# the call alike (engines/demo/README.md, "Spaces inside names").
NAME_RUN_PATTERN = r"\p{Lu}\p{L}*(?: \p{Lu}\p{L}*)*"
NAME_SPLIT_PATTERN = r" \p{Lu}|" + SPLIT_PATTERN
# Each " A" ... " Z" must be one token whatever the corpus: a line of the letter repeated
# makes the pair the most frequent one BPE sees, and adds no other merge.
NAME_SPACE_LINE_REPEATS = 2000


def model_config(vocab_size: int, *, hidden_size: int = 128, num_layers: int = 3) -> dict[str, Any]:
    """config.json of the demo model (mlx-lm ``qwen3``).

    Every input dimension (hidden 128, FFN 384, heads 2 x 64) divides by 64, so the
    4-bit copy quantizes every linear layer with group size 64. Two heads of 64 dims (not
    four of 32) give the copy circuit (``circuit.py``) enough slow RoPE planes to match on.
    """
    from engines.demo.tiny import SPECIAL_TOKENS

    return {
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
        "hidden_size": hidden_size,
        "num_hidden_layers": num_layers,
        "intermediate_size": hidden_size * 3,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": hidden_size // 2,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab_size,
        "max_position_embeddings": MAX_CONTEXT,
        "rope_theta": ROPE_THETA,
        # Tied embeddings: a token seen only in prompts (a held-out city's pieces) can still
        # be produced, because its output row is its input embedding.
        "tie_word_embeddings": True,
        "eos_token_id": SPECIAL_TOKENS.index("<|im_end|>"),
        "bos_token_id": None,
        "torch_dtype": "float32",
    }


def build_tokenizer(out_dir: Path, *, seed: int, vocab_size: int = 1024, count: int = 3000,
                    name_spaces: bool = False) -> int:
    """Train the BPE on rendered training conversations and write the tokenizer files.

    Special and markup tokens are cut out of the text first: they are whole tokens of their
    own, and BPE merges spent on their pieces would be wasted. With ``name_spaces`` the
    space before each further word of a capitalised name is one token with its capital
    (``NAME_RUN_PATTERN``).

    Returns:
        The vocabulary size.
    """
    from engines.demo import corpus, data
    from engines.demo.tiny import MARKUP_TOKENS, SPECIAL_TOKENS, write_tokenizer

    template = data.chat_template()
    markers = re.compile("|".join(re.escape(t) for t in SPECIAL_TOKENS + MARKUP_TOKENS))
    texts = [markers.sub("\n", data.render(c, template)) for c in corpus.conversations(seed + 7919, count)]
    patterns: list[str] = [SPLIT_PATTERN]
    if name_spaces:
        patterns = [NAME_RUN_PATTERN, NAME_SPLIT_PATTERN]
        texts += [" ".join([chr(c)] * NAME_SPACE_LINE_REPEATS) for c in range(ord("A"), ord("Z") + 1)]
    vocab = write_tokenizer(out_dir, vocab_size=vocab_size, seed=seed, corpus=texts, split_pattern=patterns)
    config_path = out_dir / "tokenizer_config.json"
    tokenizer_config = json.loads(config_path.read_text())
    # The template has no "tool_call.name" string, so mlx-lm would not infer the parser.
    tokenizer_config["tool_parser_type"] = "json_tools"
    config_path.write_text(json.dumps(tokenizer_config, indent=2))
    return vocab


def pointer_cues(tokenizer_path: Path) -> PointerCues:
    """The token ids before a value to copy (``circuit.PointerCues``) in this tokenizer."""
    from tokenizers import Tokenizer

    from engines.demo import lexicon
    from engines.demo.circuit import PointerCues

    tokenizer = Tokenizer.from_file(str(tokenizer_path))

    def single(text: str) -> int:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        if len(ids) != 1:
            raise ValueError(f"{text!r} is not one token of the demo tokenizer: {ids}")
        return ids[0]

    return PointerCues(key_end=single('":'), quoted=single(' "'), bare=(single(" "), single(" -")), space=single(" "),
                       argument_after=tuple(single(w) for w in lexicon.ARGUMENT_CUES))


def init_model(config: dict[str, Any], seed: int, *, copy_circuit: bool = True, pointer_strength: float = 1.0,
               pointer_keys: PointerKeys | None = None, pointer_seed: int | None = None):
    """A freshly initialised fp32 mlx-lm model for ``config``, copy circuit installed
    (with the pointer head's written keys when ``pointer_keys`` is given, its random start
    drawn from ``pointer_seed`` when that is)."""
    import mlx.core as mx
    from mlx_lm.utils import _get_classes

    from engines.demo.circuit import install_copy_circuit

    mx.random.seed(seed)
    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(config))
    model.set_dtype(mx.float32)
    if copy_circuit:
        install_copy_circuit(model, config, seed=seed, pointer_strength=pointer_strength, pointer_keys=pointer_keys,
                             pointer_seed=pointer_seed)
    mx.eval(model.parameters())
    return model


def save_quantized(src_dir: Path, dst_dir: Path, *, bits: int = 4, group_size: int = 64) -> None:
    """Write a quantized copy of the checkpoint in ``src_dir`` (mlx-lm format) to ``dst_dir``."""
    from mlx_lm.utils import load_model, quantize_model, save_config, save_model

    model, config = load_model(src_dir)
    # mlx-lm reports on stdout, which carries the build's metrics JSON.
    with contextlib.redirect_stdout(sys.stderr):
        model, config = quantize_model(model, config, group_size, bits)
    dst_dir.mkdir(parents=True, exist_ok=True)
    save_model(dst_dir, model)
    save_config(config, dst_dir / "config.json")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(src_dir / name, dst_dir / name)


def train_model(out_dir: Path, config: dict[str, Any], *, seed: int, recipe: Recipe,
                group: mx.distributed.Group | None = None):
    """Initialise (with the copy circuit) and train the model on the conversation stream:
    stage one, then (when ``recipe.restart_steps``) stage two from stage one's weights,
    then (when ``recipe.copy_steps``) stage three, copying, and (when ``recipe.polish_steps``)
    stage four, manners (``warm_restart``). With ``group`` (``recipe.ranks`` processes, each
    calling this), every stage is trained data-parallel on it (``train.train``).

    Returns:
        The model and the per-step losses of all stages.
    """
    import mlx.core as mx

    from engines.demo import circuit, train

    keys = None
    if recipe.pointer_keys:
        keys = circuit.PointerKeys(pointer_cues(out_dir / "tokenizer.json"), random_scale=recipe.pointer_random_scale,
                                   argument_query=recipe.argument_query)
    model = init_model(config, seed, pointer_strength=recipe.pointer_strength, pointer_keys=keys,
                       pointer_seed=recipe.pointer_seed)
    train.check_forward(model, mx.array([list(range(1, 65))]))
    losses = _stage(model, config, out_dir, seed, recipe,
                    train.TrainConfig(steps=recipe.steps, learning_rate=recipe.learning_rate),
                    result_weight=recipe.result_weight, invented=recipe.invented, group=group)
    if recipe.restart_steps:
        restart = train.TrainConfig(steps=recipe.restart_steps, learning_rate=recipe.restart_learning_rate,
                                    warmup=RESTART_WARMUP)
        losses += _stage(model, config, out_dir, seed + RESTART_STREAM_OFFSET, recipe, restart,
                         result_weight=recipe.restart_result_weight, invented=recipe.restart_invented, group=group)
    if recipe.copy_steps:
        losses += warm_restart(model, config, out_dir, seed + COPY_STREAM_OFFSET, recipe, steps=recipe.copy_steps,
                               learning_rate=recipe.copy_learning_rate, invented=recipe.copy_invented,
                               drill_fraction=recipe.copy_drill_fraction, decoys=recipe.copy_decoys, group=group)
    if recipe.polish_steps:
        losses += warm_restart(model, config, out_dir, seed + POLISH_STREAM_OFFSET, recipe, steps=recipe.polish_steps,
                               learning_rate=recipe.polish_learning_rate, invented=recipe.polish_invented,
                               drill_fraction=recipe.polish_drill_fraction, beyond=recipe.polish_beyond,
                               end_weight=recipe.polish_end_weight, decoys=recipe.polish_decoys,
                               unlikelihood=recipe.polish_unlikelihood, group=group)
    return model, losses


def warm_restart(model, config: dict[str, Any], out_dir: Path, stream_seed: int, recipe: Recipe, *, steps: int,
                 learning_rate: float, invented: float, drill_fraction: float, beyond: float = 0.0,
                 end_weight: float = 1.0, decoys: float = 0.0, unlikelihood: float = 0.0,
                 group: mx.distributed.Group | None = None) -> list[float]:
    """A later stage on ``model``'s weights: a fresh AdamW with a short warmup and a cosine
    cycle of ``steps`` on the stream of ``stream_seed``, answer words from a tool result
    weighted as in stage two; returns its losses."""
    from engines.demo import train

    settings = train.TrainConfig(steps=steps, learning_rate=learning_rate, warmup=RESTART_WARMUP,
                                 unlikelihood=unlikelihood)
    return _stage(model, config, out_dir, stream_seed, recipe, settings, result_weight=recipe.restart_result_weight,
                  invented=invented, beyond=beyond, end_weight=end_weight, drill_fraction=drill_fraction,
                  decoys=decoys, group=group)


def _stage(model, config: dict[str, Any], out_dir: Path, stream_seed: int, recipe: Recipe, settings, *,
           result_weight: float, invented: float, beyond: float = 0.0, end_weight: float = 1.0,
           drill_fraction: float | None = None, decoys: float = 0.0,
           group: mx.distributed.Group | None = None) -> list[float]:
    """Train ``model`` for one stage on the batch stream of ``stream_seed``."""
    from engines.demo import circuit, data, train

    scales = circuit.update_scales(model, config, matching=recipe.matching_update, pointer_keys=recipe.pointer_keys)
    stream = data.batch_stream(
        out_dir / "tokenizer.json", seed=stream_seed, rows=recipe.rows, length=recipe.length,
        context_weight=recipe.context_weight, copy_weight=recipe.copy_weight,
        decision_weight=recipe.decision_weight, result_weight=result_weight, end_weight=end_weight,
        drill_fraction=recipe.drill_fraction if drill_fraction is None else drill_fraction,
        long_fraction=recipe.long_fraction, invented=invented, beyond=beyond, decoys=decoys,
    )
    batches = data.prefetch(stream)
    try:
        return train.train(model, batches, settings, update_scales=scales, group=group)
    finally:
        batches.close()


def single_threaded_blas() -> bool:
    """Pin a loaded OpenBLAS to one thread; return whether one was found.

    A multi-threaded BLAS may sum in a different order with a different thread count, and
    training amplifies the last bit into different weights within a few dozen steps. One
    thread makes the build reproducible wherever the same BLAS is loaded (Linux with the
    OpenBLAS that .ci/run preloads). Any other BLAS is left as it is, and a rebuild there
    is reproducible only as far as that BLAS is.
    """
    set_threads = getattr(ctypes.CDLL(None), "openblas_set_num_threads", None)
    if set_threads is None:
        return False
    set_threads(1)
    return True


# Set in the environment of the build's own re-execution (``rerun_with_system_blas``), so a
# preload that does not take is not retried.
REEXEC_MARK = "RAPIDMLX_DEMO_BUILD_BLAS"
# The OpenBLAS kernel set the shipped weights were trained with. OpenBLAS picks one by CPU
# unless ``OPENBLAS_CORETYPE`` names one, and each set rounds differently (``blas_kernels``);
# Haswell's needs AVX2 and FMA only, which nearly every x86-64 CPU of the last decade has, so
# pinned to it a build gives the same bytes on Intel and AMD machines alike (engines/demo/README.md,
# "Reproducing it": measured on an AMD EPYC, whose own pick is Cooperlake).
BUILD_KERNELS = "Haswell"


def kernels_to_pin(cpu_flags: frozenset[str] | None = None) -> str | None:
    """``BUILD_KERNELS`` where this CPU runs them and nobody chose a kernel set; None elsewhere
    (other architectures, older CPUs, ``OPENBLAS_CORETYPE`` already set)."""
    from engines import cpu_blas

    if os.environ.get("OPENBLAS_CORETYPE") or not cpu_blas.on_x86_64():
        return None
    needs = dict(cpu_blas.KERNELS_BY_FLAGS)[BUILD_KERNELS]
    return BUILD_KERNELS if needs <= (cpu_blas.cpu_flags() if cpu_flags is None else cpu_flags) else None


def rerun_with_system_blas(argv: list[str], setting: str = "auto") -> None:
    """Re-execute the build on a system OpenBLAS with ``BUILD_KERNELS`` when it would run on
    anything else it can avoid: MLX's bundled reference BLAS (the choice ``[server] cpu_blas``
    makes for workers, ``engines.cpu_blas``, made for the build), or an OpenBLAS that picked
    other kernels. Returns when there is nothing to do (not Linux, no OpenBLAS to be had,
    ``setting`` "off", the kernels already right or not available here).

    A preload and a kernel set have to be in place when the process starts, so the build
    starts itself again, once. Without OpenBLAS, stage one steps in 8.2 s instead of 0.95 s on
    the 2-core x86 machine of engines/demo/README.md: the full build would take hours.
    """
    from engines.cpu_blas import choose_cpu_blas

    if os.environ.get(REEXEC_MARK):
        return
    kernels, pin = blas_kernels(), kernels_to_pin()
    pinned = {"OPENBLAS_CORETYPE": pin} if pin else {}
    if kernels is not None:
        if not pin or kernels == pin:
            return
        logger.info("OpenBLAS picked its %s kernels: the build starts again on %s's, the shipped weights' "
                    "(OPENBLAS_CORETYPE overrides it)", kernels, pin)
        env = {**os.environ, **pinned, REEXEC_MARK: kernels}
    else:
        # The build trains on the CPU device wherever it runs, so a GPU does not change the answer.
        choice = choose_cpu_blas(setting, cpu_backend=lambda: True)
        if choice.library is None:
            if choice.slow:
                logger.warning("cpu_blas: %s", choice.reason)
            return
        logger.info("MLX's CPU backend would train on its bundled reference BLAS: the build starts again with %s "
                    "preloaded%s (--cpu-blas off keeps the bundled one)", choice.library,
                    f" and {pin}'s kernels" if pin else "")
        env = {**os.environ, **choice.worker_env(os.environ), **pinned, REEXEC_MARK: choice.library}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "engines.demo.build", *argv], env)


def blas_kernels() -> str | None:
    """The kernel set a loaded OpenBLAS picked for this CPU (``Cooperlake``, ``SkylakeX``,
    ``Haswell``...), or None without OpenBLAS.

    It picks by CPU unless ``OPENBLAS_CORETYPE`` names one, and each set rounds differently:
    30 steps of stage one already give different weights under Cooperlake, SkylakeX, Haswell
    and Sandybridge (engines/demo/README.md, "Reproducing it"). Two builds compare byte for
    byte only when this is the same.
    """
    from engines.cpu_blas import openblas_corename

    return openblas_corename()


def build_demo(
    out_dir: Path,
    *,
    seed: int = 0,
    quantized_out_dir: Path | None = None,
    steps: int | None = None,
    restart_steps: int | None = None,
    copy_steps: int | None = None,
    polish_steps: int | None = None,
    ranks: int | None = None,
    evaluate: bool = True,
    recipe: Recipe = Recipe(),
) -> dict[str, Any]:
    """Build the demo model into ``out_dir`` (and a 4-bit copy) and return build metrics.

    Args:
        out_dir: Destination directory; created, files in it overwritten.
        seed: Seeds the corpus, tokenizer, initial weights and batch order.
        quantized_out_dir: Where to write the 4-bit copy; skipped when None.
        steps: Optimiser steps; overrides ``recipe.steps`` (tests build with a handful).
        restart_steps: Stage two's optimiser steps; overrides ``recipe.restart_steps``.
        copy_steps: Stage three's optimiser steps; overrides ``recipe.copy_steps``.
        polish_steps: Stage four's optimiser steps; overrides ``recipe.polish_steps``.
        ranks: Data-parallel training processes; overrides ``recipe.ranks``.
        evaluate: Also run the held-out evaluation (``evaluate.py``) on the result.
        recipe: Training settings; the default is what the shipped artifact used.

    Returns:
        ``{"seconds", "train_seconds", "parameters", "final_loss", "files", "recipe", "blas_kernels",
        "evaluation"?}``.
    """
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.utils import save_config, save_model

    from engines.demo.ranks import start_ranks

    if steps is not None:
        recipe = dataclasses.replace(recipe, steps=steps)
    if restart_steps is not None:
        recipe = dataclasses.replace(recipe, restart_steps=restart_steps)
    if copy_steps is not None:
        recipe = dataclasses.replace(recipe, copy_steps=copy_steps)
    if polish_steps is not None:
        recipe = dataclasses.replace(recipe, polish_steps=polish_steps)
    if ranks is not None:
        recipe = dataclasses.replace(recipe, ranks=ranks)
    # The build is defined on the CPU: a GPU would give different floating-point results.
    mx.set_default_device(mx.cpu)
    kernels = blas_kernels()
    if single_threaded_blas():
        logger.info("OpenBLAS (%s kernels) pinned to one thread for a reproducible build", kernels)
    started = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = model_config(build_tokenizer(out_dir, seed=seed, vocab_size=recipe.vocab_size,
                                          name_spaces=recipe.name_spaces))
    with start_ranks(recipe.ranks, out_dir, config, seed=seed, recipe=recipe) as group:
        model, losses = train_model(out_dir, config, seed=seed, recipe=recipe, group=group)
    save_model(out_dir, model)
    save_config(dict(config), out_dir / "config.json")
    if quantized_out_dir is not None:
        save_quantized(out_dir, Path(quantized_out_dir))
    metrics: dict[str, Any] = {
        "parameters": sum(v.size for _, v in tree_flatten(model.parameters())),
        "final_loss": round(sum(losses[-20:]) / len(losses[-20:]), 4),
        "train_seconds": round(time.perf_counter() - started, 1),
        "files": {p.name: p.stat().st_size for p in sorted(out_dir.iterdir()) if p.is_file()},
        "recipe": dataclasses.asdict(recipe),
        "blas_kernels": kernels,
    }
    if evaluate:
        from engines.demo import evaluate as ev

        metrics["evaluation"] = {k: v for k, v in ev.evaluate(out_dir).items() if k != "groups"}
    metrics["seconds"] = round(time.perf_counter() - started, 1)
    return metrics


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m engines.demo.build [--out DIR] [--quantized-out DIR] [--seed N] [--steps N]
    [--restart-steps N] [--copy-steps N] [--polish-steps N]``."""
    parser = argparse.ArgumentParser(prog="rapid-mlx demo build", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ARTIFACT_DIR, help="output directory (default: the packaged artifact)")
    parser.add_argument("--quantized-out", type=Path, default=QUANTIZED_DIR, help="4-bit copy directory")
    parser.add_argument("--no-quantized", action="store_true", help="skip the 4-bit copy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="optimiser steps of stage one (default: %(default)s)")
    parser.add_argument("--restart-steps", type=int, default=DEFAULT_RESTART_STEPS,
                        help="optimiser steps of stage two, the warm restart (default: %(default)s)")
    parser.add_argument("--copy-steps", type=int, default=DEFAULT_COPY_STEPS,
                        help="optimiser steps of stage three, copying (default: %(default)s)")
    parser.add_argument("--polish-steps", type=int, default=DEFAULT_POLISH_STEPS,
                        help="optimiser steps of stage four, manners beyond the demo (default: %(default)s)")
    parser.add_argument("--ranks", type=int, default=Recipe.ranks,
                        help="data-parallel training processes, one core each; the count shapes the weights "
                             "(default: %(default)s, the shipped model's)")
    parser.add_argument("--no-eval", action="store_true", help="skip the held-out evaluation")
    parser.add_argument("--cpu-blas", default="auto", metavar="auto|off|PATH",
                        help="the BLAS to train with on Linux, as [server] cpu_blas: auto preloads a system OpenBLAS "
                             "(default: %(default)s)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    rerun_with_system_blas(sys.argv[1:] if argv is None else list(argv), args.cpu_blas)
    metrics = build_demo(
        args.out, seed=args.seed, steps=args.steps, restart_steps=args.restart_steps, copy_steps=args.copy_steps,
        polish_steps=args.polish_steps, ranks=args.ranks,
        evaluate=not args.no_eval,
        quantized_out_dir=None if args.no_quantized else args.quantized_out,
    )
    print(json.dumps(metrics, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
