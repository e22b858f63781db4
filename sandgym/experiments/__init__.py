"""Experiments: the layer above ``train`` and ``evaluate`` that uses both.

``periodic_eval`` (held-out evaluation during training, the training loop's ``on_eval`` hook), ``sweep`` +
``sweep_report`` (seeds x variations, with intervals), ``demo`` (``make demo``) and ``cli`` (``sandgym train``
with the evaluation hook wired in, ``sandgym sft``, ``sandgym sweep``).
"""
