"""The ``offload`` command line's sub-commands (private; the entry point is :mod:`offload._cli`).

One module per command: ``_delegates``, ``_check`` (with ``_graph_draw``), ``_benchmark``
(with ``_bench_memory``, ``_bench_runs``, ``_bench_print`` and ``_bench_profile``, the
``--profile`` table), ``_diff`` (with ``_per_node_text``, the text of ``--per-node``),
``_classify``, ``_run`` (``offload run``, over :mod:`offload._patch`), ``_version``
(``offload --version``), ``_sweep``; shared helpers in ``_common``.

A command parses its flags, calls the library and prints what it returns. What the public
API offers lives below, in the library: the per-node diff (``offload._per_node`` with
``_per_node_result``; public as ``offload.diff_per_node``) and the sweep (``offload._sweep``
with ``_sweep_data``, ``_sweep_worker``, ``_sweep_engines`` and ``_sweep_report``; public as
``offload.sweep``). The library loads nothing from here, so ``import offload`` loads no
command; only the partition maps of ``SweepReport.write_html``, which are ``offload check``'s
pages, import the check when a report asks for them.
"""
