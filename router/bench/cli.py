"""``rapid-mlx bench WORKLOAD [options]``: measure any OpenAI- or Anthropic-compatible server."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

from engines.prefill_policy import PREFILL_SHARE
from router.bench.profiles import PROFILES

WORKLOADS = {
    "agent": "S concurrent agent sessions of T turns, each resending its whole history",
    "burst": "N concurrent independent prompts: aggregate and per-request decode tok/s, TTFT",
    "tools": "prompts that need a tool: calls parsed, arguments valid, markup leaked, calls missing",
    "restart": "two turns, a graceful restart (needs --launch or --compare), then the next turn",
    "long": "one session grown to a long context: TTFT per turn as the context grows",
}
DEFAULT_MAX_TOKENS = {"agent": 32, "burst": 128, "tools": 96, "restart": 32, "long": 16}
EPILOG = """examples:
  rapid-mlx bench make-model --size small --out /tmp/bench-model
  rapid-mlx bench agent --base-url http://127.0.0.1:8000 --model demo --sessions 1,4
  rapid-mlx bench agent --model default_model --sessions 1,4 --rounds 2 --tokenizer /tmp/bench-model \\
      --labels mlx_lm.server,rapid-mlx \\
      --compare "python -m mlx_lm server --model /tmp/bench-model --port {port}" \\
                "rapid-mlx serve --config bench.toml --port {port}"
"""


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _float_list(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values or any(not 0 < v <= 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected numbers in (0, 1], got {text!r}")
    return values


def _target_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    where = common.add_argument_group("target (one of)").add_mutually_exclusive_group(required=True)
    where.add_argument("--base-url", help="a running server, e.g. http://127.0.0.1:8000 (or …/v1)")
    where.add_argument("--launch", metavar="CMD", help='start this command per phase, e.g. "rapid-mlx serve --port {port}"')
    where.add_argument("--compare", nargs=2, metavar=("CMD_A", "CMD_B"),
                       help="two launch commands run alternately (A B A B ...); ratios are B/A")
    options = common.add_argument_group("run")
    options.add_argument("--model", required=True, help="model name sent in every request")
    options.add_argument("--api", choices=("openai", "anthropic"), default="openai",
                         help="OpenAI chat completions or Anthropic Messages (default: openai)")
    options.add_argument("--labels", help="names of the targets, comma-separated (default: A,B or server)")
    options.add_argument("--rounds", type=int, help="rounds per phase (default: 2 with --compare, else 1)")
    options.add_argument("--max-tokens", type=int, help="per request (default: agent 32, burst 128, tools 96, restart 32, long 16)")
    options.add_argument("--ignore-eos", action="store_true", help="bias the EOS token away (needs --tokenizer), so every request decodes --max-tokens")
    options.add_argument("--tokenizer", type=Path, help="the model's tokenizer directory: exact ideal cached tokens, and --ignore-eos")
    options.add_argument("--seed", type=int, default=0, help="content seed (default 0)")
    options.add_argument("--out", type=Path, help="output directory (default: bench-results/WORKLOAD-TIMESTAMP)")
    options.add_argument("--max-errors", type=int, default=0, help="exit 1 when more requests fail than this (default 0)")
    options.add_argument("--ready-timeout", type=float, default=600.0, help="seconds a server may take to answer (default 600)")
    options.add_argument("--timeout", type=float, default=600.0, help="seconds per request (default 600)")
    return common


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rapid-mlx bench", description=__doc__, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    workloads = parser.add_subparsers(dest="workload", required=True, metavar="WORKLOAD")
    common = _target_options()
    agent = workloads.add_parser("agent", parents=[common], help=WORKLOADS["agent"])
    agent.add_argument("--sessions", type=_int_list, default=[1, 4], help="concurrent sessions per phase, e.g. 1,4,8")
    agent.add_argument("--turns", type=int, default=8)
    agent.add_argument("--distinct-prefix", action="store_true", help="each session its own system prompt and tools")
    burst = workloads.add_parser("burst", parents=[common], help=WORKLOADS["burst"])
    burst.add_argument("--n", type=_int_list, default=[1, 8, 32], help="concurrent requests per phase, e.g. 1,8,32")
    burst.add_argument("--prompt-tokens", type=int, default=200, help="about this many tokens per prompt")
    tools = workloads.add_parser("tools", parents=[common], help=WORKLOADS["tools"])
    tools.add_argument("--cases", type=Path, help='JSONL of {"messages", "tools", "expect"} (default: the demo model\'s tool prompts)')
    tools.add_argument("--limit", type=int, help="use the first N cases")
    tools.add_argument("--tool-choice", choices=("auto", "required"), default="auto",
                       help="required: every case must call a tool (constrained decoding where the server has it)")
    restart = workloads.add_parser("restart", parents=[common], help=WORKLOADS["restart"])
    restart.add_argument("--kill", action="store_true", help="SIGKILL the server and its children instead of a graceful stop (a crash)")
    long = workloads.add_parser("long", parents=[common], help=WORKLOADS["long"])
    long.add_argument("--to", type=int, default=32768, help="grow the context to about this many tokens")
    long.add_argument("--step", type=int, default=2048, help="tokens added per turn")
    for sub in (agent, restart, long):
        sub.add_argument("--profile", choices=sorted(PROFILES), default="small",
                         help="claude-code (~12k tokens of system and tools), codex (~5k), small (~2.5k), tiny (checks)")
    for sub in (agent, restart):
        sub.add_argument("--result-tokens", type=int, default=300, help="tokens per tool result")
    agent.add_argument("--tool-time", type=float, default=0.5, help="mean simulated tool time between turns, s (uniform 0..2x)")

    parsers = workloads.add_parser("parsers", help="in process: streaming-parser cost per token against a decode step")
    parsers.add_argument("--size", choices=("tiny", "small", "medium"), default="small")
    parsers.add_argument("--repeats", type=int, default=5)
    parsers.add_argument("--against", type=Path, help="also time another checkout's parsers on the same texts "
                         "(e.g. a git worktree of an older commit), alternating rounds")
    parsers.add_argument("--rounds", type=int, default=6, help="with --against: rounds per side")
    parsers.add_argument("--out", type=Path)
    scripted = workloads.add_parser("tools-scripted", help="in process, no server: every tool-call family's scripted outputs "
                                    "through the parsers, whole and streamed; exit 1 if any is not parsed as written")
    scripted.add_argument("--family", action="append", help="only this tool parser (repeatable)")
    scripted.add_argument("--out", type=Path)
    grammar = workloads.add_parser("grammar", help="in process: constrained decoding's cost per step (free vs masked) "
                                   "and a 12-tool grammar's compile time")
    grammar.add_argument("--size", choices=("tiny", "small", "medium"), default="small")
    grammar.add_argument("--model-dir", type=Path, help="a checkpoint with its tokenizer instead of a made one of --size")
    grammar.add_argument("--sequences", type=_int_list, default=[1, 8], help="batch widths, e.g. 1,8")
    grammar.add_argument("--steps", type=int, default=48, help="decode steps timed per run")
    grammar.add_argument("--rounds", type=int, default=3)
    grammar.add_argument("--out", type=Path)
    step = workloads.add_parser("step", help="in process: the scheduler's step against mlx-lm's BatchGenerator alone")
    step.add_argument("--size", choices=("tiny", "small", "medium"), default="tiny")
    step.add_argument("--model-dir", type=Path, help="a checkpoint instead of a made one of --size")
    step.add_argument("--sequences", type=_int_list, default=[8, 32, 64], help="batch widths, e.g. 8,32,64")
    step.add_argument("--steps", type=int, default=64, help="decode steps timed per run")
    step.add_argument("--rounds", type=int, default=3)
    step.add_argument("--profile", action="store_true", help="profile the worker's step instead: where its time goes, by category")
    step.add_argument("--out", type=Path)
    engine = workloads.add_parser("engine-burst", help="in process: a burst through the scheduler against mlx-lm's BatchGenerator alone")
    engine.add_argument("--size", choices=("tiny", "small", "medium"), default="small")
    engine.add_argument("--model-dir", type=Path, help="a checkpoint instead of a made one of --size")
    engine.add_argument("--n", type=_int_list, default=[8, 32, 64], help="requests per burst, e.g. 8,32,64")
    engine.add_argument("--prompt-tokens", type=int, default=200)
    engine.add_argument("--max-tokens", type=int, default=128)
    engine.add_argument("--concurrency", type=int, default=64, help="sequences decoding at once at most (max_concurrency)")
    engine.add_argument("--prefill-step", type=int, default=2048)
    engine.add_argument("--long-every", type=int, default=0, help="every Nth prompt is --long-tokens long (default: none)")
    engine.add_argument("--long-tokens", type=int, default=2000)
    engine.add_argument("--prefill-share", type=_float_list, default=[PREFILL_SHARE],
                        help=f"the scheduler's prefill shares to run, e.g. 0.5,0.9,1 (default {PREFILL_SHARE})")
    engine.add_argument("--rounds", type=int, default=2)
    engine.add_argument("--out", type=Path)
    disk = workloads.add_parser("disk-tier", help="in process: seconds per GB to flush, index and load the prefix cache on disk")
    disk.add_argument("--model-dir", type=Path, required=True)
    disk.add_argument("--entries", type=int, default=16)
    disk.add_argument("--tokens", type=int, default=4096, help="tokens per entry")
    disk.add_argument("--dir", type=Path, help="where to write (a temporary directory inside it); default: the system's")
    disk.add_argument("--out", type=Path)
    kv = workloads.add_parser("kv-memory", help="in process: KV bytes per token at 16/8/4 bits and what fits a memory budget")
    kv.add_argument("--model-dir", type=Path, required=True, help="a checkpoint directory (make-model writes one)")
    kv.add_argument("--tokens", type=int, default=2048, help="tokens to prefill before measuring")
    kv.add_argument("--group-size", type=int, choices=(32, 64, 128), default=64)
    kv.add_argument("--budget-gb", type=float, default=16.0, help="the KV memory budget to fit")
    kv.add_argument("--context", type=int, default=32768, help="tokens per session, for the sessions that fit")
    kv.add_argument("--dtype", choices=("float16", "bfloat16", "float32"), default="float16", help="the model's dtype for the run")
    kv.add_argument("--out", type=Path)
    hop = workloads.add_parser("hop", help="what one upstream hop adds to TTFT: paired requests, direct and through a front")
    hop.add_argument("--direct", required=True, help="the upstream server, e.g. http://127.0.0.1:8201")
    hop.add_argument("--front", required=True, help="a server proxying to it, e.g. http://127.0.0.1:8200")
    hop.add_argument("--model", required=True, help="the model name at the upstream")
    hop.add_argument("--front-model", help="its name at the front (default: --model)")
    hop.add_argument("--pairs", type=int, default=200)
    hop.add_argument("--front-pid", type=int, help="the front's pid (Linux): also report its CPU time per proxied request")
    hop.add_argument("--out", type=Path)
    canned = workloads.add_parser(
        "canned-upstream", help="an upstream that answers every streamed chat request at once (or after --gap-ms): bench hop's front alone")
    canned.add_argument("--host", default="127.0.0.1")
    canned.add_argument("--port", type=int, default=8301)
    canned.add_argument("--gap-ms", type=float, default=0.0,
                        help="wait between the role frame and the token, as a model's prefill does (default 0)")
    make = workloads.add_parser("make-model", help="write a deterministic random-weight checkpoint both servers load offline")
    make.add_argument("--arch", choices=("qwen3", "llama", "qwen3_next"), default="qwen3")
    make.add_argument("--size", choices=("tiny", "small", "medium"), default="small")
    make.add_argument("--seed", type=int, default=0)
    make.add_argument("--out", type=Path, required=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.workload == "make-model":
        return _make_model(args)
    if args.workload == "canned-upstream":
        from router.bench.canned_upstream import serve_canned_upstream

        try:
            asyncio.run(serve_canned_upstream(args.host, args.port, gap_ms=args.gap_ms))
        except KeyboardInterrupt:
            pass  # Ctrl-C is how it is meant to stop
        return 0
    out_dir = args.out or Path("bench-results") / f"{args.workload}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    if args.workload == "parsers":
        return _parsers(args, out_dir)
    if args.workload == "kv-memory":
        return _kv_memory(args, out_dir)
    if args.workload == "step":
        return _step(args, out_dir)
    if args.workload == "disk-tier":
        return _disk_tier(args, out_dir)
    if args.workload == "engine-burst":
        return _engine_burst(args, out_dir)
    if args.workload == "grammar":
        return _grammar(args, out_dir)
    if args.workload == "hop":
        from router.bench.proxy_hop import cpu_seconds, hop_report, measure_hop

        cpu_before = cpu_seconds(args.front_pid) if args.front_pid else None
        results = measure_hop(args.direct, args.model, args.front, args.front_model or args.model, pairs=args.pairs)
        # The two warm-up pairs count too: a little over, never under.
        front_cpu = cpu_seconds(args.front_pid) - cpu_before if cpu_before is not None else None
        return _write_summary(out_dir, "hop", hop_report(results, front_cpu))
    if args.workload == "tools-scripted":
        return _scripted_tools(parser, args, out_dir)
    return _run(parser, args, out_dir)


def _make_model(args: argparse.Namespace) -> int:
    from router.bench.models import make_model, parameter_count

    path = make_model(args.out, arch=args.arch, size=args.size, seed=args.seed)
    print(f"{path}: {args.arch} {args.size}, {parameter_count(path) / 1e6:.1f}M parameters")
    return 0


def _write_summary(out_dir: Path, workload: str, text: str) -> int:
    """An in-process workload's report: summary.md in ``out_dir``, and the same on stdout."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.md").write_text(f"# rapid-mlx bench {workload}\n\n" + text)
    print(text)
    return 0


def _parsers(args: argparse.Namespace, out_dir: Path) -> int:
    from router.bench.parser_cost import parser_cost_report

    report = parser_cost_report(args.size, args.repeats)
    if args.against:
        from router.bench.parser_cost import against_report

        report += "\n" + against_report(args.against, args.rounds, args.repeats)
    return _write_summary(out_dir, "parsers", report)


def _scripted_tools(parser: argparse.ArgumentParser, args: argparse.Namespace, out_dir: Path) -> int:
    from router.bench.scripted_tools import RENDER, scripted_report

    unknown = sorted(set(args.family or ()) - set(RENDER))
    if unknown:
        parser.error(f"--family: no script for {', '.join(unknown)}; scripted families: {', '.join(RENDER)}")
    text, failed = scripted_report(args.family)
    _write_summary(out_dir, "tools-scripted", text)
    return 1 if failed else 0


def _grammar(args: argparse.Namespace, out_dir: Path) -> int:
    from router.bench.grammar_cost import measure, report

    described, results, compile_lines = measure(args.model_dir, args.size, args.sequences, args.steps, args.rounds)
    return _write_summary(out_dir, "grammar", report(described, results, compile_lines, args.steps))


def _step(args: argparse.Namespace, out_dir: Path) -> int:
    from router.bench.step_cost import measure, profile, report

    if args.profile:
        return _write_summary(out_dir, "step --profile", profile(args.model_dir, args.size, args.sequences, args.steps))
    described, results = measure(args.model_dir, args.size, args.sequences, args.steps, args.rounds)
    text = report(described, results, args.steps)
    return _write_summary(out_dir, "step", text)


def _engine_burst(args: argparse.Namespace, out_dir: Path) -> int:
    from router.bench.engine_burst import Burst, measure, report

    burst = Burst(args.prompt_tokens, args.max_tokens, args.long_every, args.long_tokens)
    settings = {"concurrency": args.concurrency, "prefill_step": args.prefill_step}
    described, results = measure(args.model_dir, args.size, args.n, burst, shares=args.prefill_share, rounds=args.rounds, **settings)
    return _write_summary(out_dir, "engine-burst", report(described, results, burst, **settings))


def _disk_tier(args: argparse.Namespace, out_dir: Path) -> int:
    from router.bench.disk_tier import measure, report

    text = report(measure(args.model_dir, entries=args.entries, tokens=args.tokens, directory=args.dir),
                  model_dir=args.model_dir, tokens=args.tokens)
    return _write_summary(out_dir, "disk-tier", text)


def _kv_memory(args: argparse.Namespace, out_dir: Path) -> int:
    from router.bench.kv_memory import measure, report

    try:
        rows = measure(args.model_dir, tokens=args.tokens, group_size=args.group_size, dtype=args.dtype)
    except ValueError as exc:  # a group size the model cannot take
        print(f"rapid-mlx bench kv-memory: {exc}", file=sys.stderr)
        return 2
    text = report(rows, budget_gb=args.budget_gb, context=args.context, model_dir=args.model_dir, tokens=args.tokens,
                  group_size=args.group_size, dtype=args.dtype)
    return _write_summary(out_dir, "kv-memory", text)


def _workload(args: argparse.Namespace):
    from router.bench.workloads import agent, burst, long, restart, tools

    kinds = {"agent": agent.AgentWorkload, "burst": burst.BurstWorkload, "tools": tools.ToolsWorkload,
             "restart": restart.RestartWorkload, "long": long.LongWorkload}
    return kinds[args.workload].from_args(args)


def _targets(parser: argparse.ArgumentParser, args: argparse.Namespace):
    from router.bench.targets import TargetSpec

    commands = args.compare or ([args.launch] if args.launch else [None])
    labels = args.labels.split(",") if args.labels else (["A", "B"] if args.compare else ["server"])
    if len(labels) != len(commands):
        parser.error(f"--labels names {len(labels)} targets for {len(commands)}")
    try:
        if args.base_url:
            return [TargetSpec(labels[0], base_url=args.base_url)]
        return [TargetSpec(label, launch=command) for label, command in zip(labels, commands)]
    except ValueError as exc:
        parser.error(str(exc))


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, out_dir: Path) -> int:
    from router.bench.ideal import PromptTokenizer
    from router.bench.progress import progress_bar
    from router.bench.report import write_report
    from router.bench.runner import BenchOptions, run_bench

    targets = _targets(parser, args)
    try:
        workload = _workload(args)
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    tokenizer = PromptTokenizer(args.tokenizer) if args.tokenizer else None
    sampling = {}
    if args.ignore_eos:
        if tokenizer is None or tokenizer.eos_token_id is None:
            parser.error("--ignore-eos needs --tokenizer (of a model with an EOS token)")
        sampling["logit_bias"] = {str(tokenizer.eos_token_id): -100}
    options = BenchOptions(
        model=args.model, api=args.api, rounds=args.rounds or (2 if args.compare else 1),
        max_tokens=args.max_tokens or DEFAULT_MAX_TOKENS[args.workload], sampling=sampling, seed=args.seed,
        ready_timeout_s=args.ready_timeout, request_timeout_s=args.timeout)
    planned = sum(workload.planned_requests(p) for p in workload.phases()) * options.rounds * len(targets)
    with progress_bar(f"bench {args.workload}", planned) as advance:
        result = asyncio.run(run_bench(workload, targets, options, out_dir, tokenizer=tokenizer,
                                       on_record=lambda record: advance(1), on_skipped=advance))
    written = write_report(result, out_dir)
    print((out_dir / "summary.md").read_text())
    print("wrote " + ", ".join(str(p) for p in written))
    problems = result.request_errors() + len(result.failures())
    if problems > args.max_errors:
        print(f"rapid-mlx bench: {result.request_errors()} failed requests and {len(result.failures())} failed phases "
              f"(--max-errors {args.max_errors})", file=sys.stderr)
        return 1
    return 0
