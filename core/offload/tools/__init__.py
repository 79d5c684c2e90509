"""The ``offload`` command line's sub-commands (private; the entry point is :mod:`offload._cli`).

One module per command: ``_delegates``, ``_check`` (with ``_graph_draw``), ``_benchmark``
(with ``_bench_memory``, ``_bench_runs`` and ``_bench_print``), ``_diff`` (with ``_per_node``,
the per-node diff, also a Python API: ``diff_per_node``), ``_classify``; shared helpers in
``_common``.
"""
