"""Safe RL algorithms in JAX on one PPO core; algos/registry.py's table lists them (docs/algos.md)."""
