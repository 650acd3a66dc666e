"""``rapid-mlx bench``: time to first token, cache hits and tool-call failures of any server.

Workloads (agent, burst, tools, restart, long) send real requests through the OpenAI or
Anthropic API and record every one raw (``client.RequestRecord``); every figure is derived
from those records (``stats``), per phase, round and target; ``--compare`` alternates two
launched servers and reports B/A per round.
"""
