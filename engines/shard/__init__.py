"""One model served by a group of processes started with ``mlx.launch`` (issue 22).

- ``launch``: the command line the router runs (``mlx.launch`` over the configured hosts);
- ``lockstep``: rank 0's decisions for each step, delivered to every rank over the group;
- ``load``: mlx-lm's tensor or pipeline sharding of the checkpoint;
- ``worker``: the process entry of every rank (rank 0 also speaks the worker protocol).
"""
