"""Environments: Gymnasium envs whose tools run in a sandbox, tool calling, and versioned rewards."""
