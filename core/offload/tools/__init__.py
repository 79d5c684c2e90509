"""The ``offload`` command line's sub-commands (private; the entry point is :mod:`offload._cli`).

One module per command: ``_delegates``, ``_check`` (with ``_graph_draw``), ``_benchmark``
(with ``_bench_memory``, ``_bench_runs``, ``_bench_print`` and ``_bench_profile``, the
``--profile`` table), ``_diff`` (with ``_per_node``,
the per-node diff, public as ``offload.diff_per_node``), ``_classify``, ``_run`` (``offload
run``, over :mod:`offload._patch`), ``_version`` (``offload --version``), ``_sweep`` (with
``_sweep_data``, ``_sweep_worker``, ``_sweep_engines`` and ``_sweep_report``; public as
``offload.sweep``); shared helpers in ``_common``.
"""
