"""Safe RL algorithms in JAX (PPO, PPO-Lag, P3O, FOCOPS) on one jitted PPO core."""
