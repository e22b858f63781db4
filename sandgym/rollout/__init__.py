"""The rollout layer, between ``agents`` and ``train | evaluate``: what training and evaluation both use.

``checkpoints`` (run-directory and checkpoint discovery, read-only), ``pool`` (Ray: cluster start-up and the
fault-tolerant worker pool), ``progress`` (the progress bar), ``runner`` + ``cli`` (scripted agents over an env:
``sandgym run|envs|rewards``), ``audit`` + ``audit_attacks`` (``sandgym rewards audit``). Nothing heavy is
imported here.
"""
