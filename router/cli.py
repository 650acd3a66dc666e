"""The ``rapid-mlx`` command: serve, validate, models, status, reload, demo build, bench."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from router.ops.config import ConfigError, RouterConfig, read_config_text, resolve_runtime_dir, single_model_config

logger = logging.getLogger("router")

DEMO_MODEL_ID = "demo"
DEFAULT_URL = "http://127.0.0.1:8000"
ADMIN_KEY_ENV = "RAPIDMLX_ADMIN_KEY"  # the key `status` and `reload` send, when the server has [[keys]]
# Greedy and without thinking by default: that is how the demo model calls tools most
# reliably (engines/demo/README.md), and a model this small rambles when sampled at
# temperature 1. Clients can still ask for any temperature, or for thinking.
# Its replies are short; the ceiling keeps a reply that loops from holding a slot for long.
# It was trained on conversations of at most 512 tokens, so it attends to the latest 1024: an
# agent's 20-70k-token prompt then prefills in linear time (Claude Code's first request, 73k
# tokens: 164 s to the first token with the whole context, 8.9 s with the window, on 2 cores)
# and ends in a brief reply instead of running on (engines/demo/README.md).
DEMO_MODEL_OPTIONS = {"sampling": {"temperature": 0.0}, "chat_template_kwargs": {"enable_thinking": False},
                      "max_output_tokens": 512, "kv_cache": {"window": 1024}}
# Served without a config, the demo answers to any model name: Claude Code asks for "claude-…"
# names, Codex for "gpt-…", and a newcomer's first request should not fail on the name.
DEMO_ALIASES = ["*"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rapid-mlx", description="A multi-model LLM router on MLX.")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve the models of a config file (or the demo model)")
    serve.add_argument("--config", type=Path, help="rapidmlx.toml; without it, the bundled demo model is served")
    serve.add_argument("--host", help="override [server] host")
    serve.add_argument("--port", type=int, help="override [server] port")

    validate = commands.add_parser("validate", help="check a config file (the whole fleet it describes); exit 1 if it has errors")
    validate.add_argument("file", type=Path)
    validate.add_argument("--probe", action="store_true", help="also ask every upstream model's server whether it answers (exit 1 if one does not)")

    models = commands.add_parser("models", help="list the models a config declares")
    models.add_argument("--config", type=Path)

    status = commands.add_parser("status", help="ask a running server how each model is doing (GET /admin/status)")
    status.add_argument("--url", default=DEFAULT_URL, help=f"the server (default {DEFAULT_URL})")
    status.add_argument("--key", default=os.environ.get(ADMIN_KEY_ENV), help=f"an admin key, with [[keys]] (default ${ADMIN_KEY_ENV})")

    reload = commands.add_parser("reload", help="make a running server reload its config file (POST /admin/reload)")
    reload.add_argument("--url", default=DEFAULT_URL, help=f"the server (default {DEFAULT_URL})")
    reload.add_argument("--key", default=os.environ.get(ADMIN_KEY_ENV), help=f"an admin key, with [[keys]] (default ${ADMIN_KEY_ENV})")

    demo = commands.add_parser("demo", help="the bundled demo model")
    demo_commands = demo.add_subparsers(dest="demo_command", required=True)
    demo_commands.add_parser("build", help="rebuild the demo model from nothing (options: rapid-mlx demo build -h)", add_help=False)

    # Its workloads and options live in router/bench/cli.py (rapid-mlx bench -h).
    commands.add_parser("bench", help="measure a server: TTFT, cache hits, tool-call failures (rapid-mlx bench -h)", add_help=False)

    # ``demo build`` and ``bench`` hand their arguments to their own parsers, so their options live in one place.
    args, rest = parser.parse_known_args(argv)
    if args.command == "demo":
        from engines.demo.build import main as build_main

        return build_main(rest)
    if args.command == "bench":
        from router.bench.cli import main as bench_main

        return bench_main(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "serve":
        return _exit_without_teardown(_serve(args))
    if args.command == "validate":
        return _validate(args.file, probe=args.probe)
    if args.command == "status":
        from router.ops.status_table import print_status

        return print_status(args.url, args.key)
    if args.command == "reload":
        from router.ops.status_table import request_reload

        return request_reload(args.url, args.key)
    return _models(args.config)


def _load(config_path: Path | None, **server_overrides) -> tuple[RouterConfig, str | None, dict]:
    """The config to serve, the file's text (None for the demo) and the overrides reloads reapply."""
    overrides = {k: v for k, v in server_overrides.items() if v is not None}
    if config_path is None:
        options = {**DEMO_MODEL_OPTIONS, "aliases": DEMO_ALIASES}
        return single_model_config(DEMO_MODEL_ID, str(demo_model_path()), model_options=options, **overrides), None, {}
    from router.ops.reload.reloader import check_config

    nested = {"server": overrides} if overrides else {}
    text = read_config_text(config_path)
    return check_config(text, source=str(config_path), overrides=nested), text, nested


def _serve(args: argparse.Namespace) -> int:
    import faulthandler

    import uvicorn

    # A native crash (a library's abort or segfault) leaves every thread's stack in the log
    # instead of a bare exit status.
    faulthandler.enable()

    from router.app import create_app
    from router.ops.runtime_dir import RuntimeDirError, prepare_runtime_dir
    from router.http.header_timeout import header_timeout_protocol

    try:
        config, text, overrides = _load(args.config, host=args.host, port=args.port)
    except ConfigError as exc:
        print(f"{args.config}: invalid configuration:\n{exc}", file=sys.stderr)
        return 1
    try:
        # Checked before anything listens: worker sockets go there, so it must be ours alone.
        runtime_dir = prepare_runtime_dir(resolve_runtime_dir(config.server))
    except RuntimeDirError as exc:
        print(f"rapid-mlx: {exc}", file=sys.stderr)
        return 1
    _configure_logging(config.server.log_level)
    config_path = args.config.absolute() if args.config else None
    app = create_app(config, runtime_dir=runtime_dir, config_path=config_path, config_text=text, overrides=overrides)
    logger.info("serving %s on http://%s:%d", ", ".join(config.models), config.server.host, config.server.port)
    server = _graceful_server_class()(uvicorn.Config(
        app, host=config.server.host, port=config.server.port, log_level=config.server.log_level,
        timeout_graceful_shutdown=int(config.server.drain_timeout_s), http=header_timeout_protocol(config.server.header_timeout_s),
        log_config=None,  # uvicorn's lines go through the root handler too, with their request ids
    ))
    server.run()
    return 0 if server.started else 1


def _exit_without_teardown(code: int) -> int:
    """End the serving process now, skipping the interpreter's teardown.

    The router imports MLX (mlx-lm's tokenizer loading) and uses it from anyio's worker threads;
    MLX's C++ runtime then sometimes aborts in its static destructors at exit ("terminate called
    without an active exception", ml-explore/mlx#3126): status -6 after a clean stop, which a
    service manager reads as a crash. By now the workers are stopped with their caches flushed
    and nothing of the router's needs a destructor; the log and stdio are flushed here.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _configure_logging(level: str) -> None:
    """One format for the router's lines and uvicorn's: time, level, logger, request id, message.

    ``force``: an import (transformers, via mlx-lm) may have configured the root logger already.
    """
    from router.http.request_id import RequestIdFilter

    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s", force=True)
    for handler in logging.getLogger().handlers:
        handler.addFilter(RequestIdFilter())
    # httpx logs every request at INFO: each proxied request and upstream health check, once more.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def _graceful_server_class():
    import uvicorn

    class GracefulServer(uvicorn.Server):
        """SIGTERM and SIGINT stop accepting, let requests finish (drain_timeout_s), stop the
        workers with their caches flushed, and exit 0: a service manager sees a clean stop."""

        def handle_exit(self, sig, frame) -> None:
            super().handle_exit(sig, frame)
            # uvicorn re-raises a captured signal after its shutdown, which would end the process
            # by the signal (status -15) after everything was already stopped cleanly.
            self._captured_signals.clear()

    return GracefulServer


def _validate(path: Path, *, probe: bool = False) -> int:
    """The checks a reload runs (the schema, the fleet's references and local_only, every pinned parser
    name); with ``probe``, whether each upstream answers now."""
    from router.ops.reload.reloader import check_config

    try:
        config = check_config(read_config_text(path), source=str(path))
    except ConfigError as exc:
        print("\n".join(exc.errors), file=sys.stderr)
        return 1
    local, remote = len(config.local_models), len(config.upstream_models)
    print(f"{path}: ok ({local} local model{'s' * (local != 1)}, {remote} upstream model{'s' * (remote != 1)})")
    if not probe:
        return 0
    from router.upstream.probe import probe_upstreams

    lines, reachable = probe_upstreams(config)
    print("\n".join(lines) if lines else "no upstream models to probe")
    return 0 if reachable else 1


def _models(config_path: Path | None) -> int:
    """Print each model with the output parsers it gets and why."""
    try:
        config, _, _ = _load(config_path)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    upstreams = config.upstream_models
    for model_id, model in config.models.items():
        aliases = ", ".join(model.aliases) or "-"
        if model_id in upstreams:
            print(f"{model_id}\n  upstream: {model.upstream} (model {model.upstream_model or model_id!r})\n  aliases: {aliases}")
            continue
        print(f"{model_id}\n  path: {model.path}\n  aliases: {aliases}\n  preload: {str(model.preload).lower()}")
        tool, reasoning, constrained = _parser_lines(model, offline=config.server.offline)
        print(f"  tool parser: {tool}\n  reasoning parser: {reasoning}\n  required tool calls: {constrained}")
    return 0


def _parser_lines(model, *, offline: bool) -> tuple[str, str, str]:
    """What the server will choose for this model and why, from its files (no weights loaded)."""
    from router.model_files import ModelFilesError, resolve_model_path
    from router.turn.parser_choice import ParserConfigError, choose_parsers

    try:
        # Never downloads here: a repo id not yet in the local cache is reported as such.
        path = resolve_model_path(model.path, offline=True)
        choice = choose_parsers(path, tool_parser=model.tool_parser, reasoning_parser=model.reasoning_parser, model_name=model.path)
    except ModelFilesError as exc:
        pending = f"{model.tool_parser} (decided at load: {exc})"
        return pending, f"{model.reasoning_parser} (decided at load)", "decided at load"
    except ParserConfigError as exc:
        return f"invalid: {exc}", f"{model.reasoning_parser}", "-"
    return choice.tool_line(), choice.reasoning_line(), _constraint_line(choice.tool_parser)


def _constraint_line(tool_parser: str | None) -> str:
    """How tool_choice required / named is kept: by a grammar in the family's format, or by prompting."""
    from router.turn.tool_grammar import GRAMMAR_FAMILIES, grammar_family

    if grammar_family(tool_parser) is not None:
        return "constrained decoding (the family's format, arguments by their schemas)"
    return f"prompting only (constrained decoding covers {', '.join(GRAMMAR_FAMILIES)})"


def demo_model_path() -> Path:
    """The bundled demo checkpoint (package data, built by ``rapid-mlx demo build``)."""
    from engines.demo.build import ARTIFACT_DIR

    if not (ARTIFACT_DIR / "config.json").is_file():
        raise SystemExit(f"the demo model is missing from {ARTIFACT_DIR}; rebuild it with `rapid-mlx demo build`")
    return ARTIFACT_DIR


if __name__ == "__main__":
    sys.exit(main())
