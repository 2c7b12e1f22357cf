"""Plain-JAX MLPs for the policy and the critics (CRAX: lecun-uniform kernels, zero biases)."""
from __future__ import annotations

import jax
import jax.numpy as jnp

ACTIVATION_FNS = {"swish": jax.nn.swish, "tanh": jnp.tanh, "relu": jax.nn.relu, "elu": jax.nn.elu}


def init_mlp(key, sizes: tuple) -> list:
    """Layers [{'w', 'b'}] for consecutive sizes (input, hidden..., output)."""
    layers = []
    for key_layer, (fan_in, fan_out) in zip(jax.random.split(key, len(sizes) - 1), zip(sizes[:-1], sizes[1:])):
        limit = jnp.sqrt(3.0 / fan_in)  # lecun uniform: variance 1 / fan_in
        w = jax.random.uniform(key_layer, (fan_in, fan_out), jnp.float32, -limit, limit)
        layers.append({"w": w, "b": jnp.zeros((fan_out,), jnp.float32)})
    return layers


def apply_mlp(layers: list, x, activation: str):
    """x [..., in] -> [..., out]. Leading axes are folded into one before the first layer: XLA's
    CPU backend runs a rank-2 matmul (and the rank-2 weight gradient of the backward pass) on
    its fast path, a rank-3 one not (about 20 % of a minibatch gradient at the cpu preset)."""
    act = ACTIVATION_FNS[activation]
    lead = x.shape[:-1]
    x = x.reshape(-1, x.shape[-1])
    for layer in layers[:-1]:
        x = act(x @ layer["w"] + layer["b"])
    x = x @ layers[-1]["w"] + layers[-1]["b"]
    return x.reshape(*lead, x.shape[-1])


def init_params(key, obs_size: int, action_size: int, policy_hidden: tuple, critic_hidden: tuple,
                with_cost_critic: bool) -> dict:
    """Policy (outputs mean and raw scale per action), reward critic, optional cost critic.

    As in CRAX the cost critic is initialised with the reward critic's key, so both start equal.
    """
    key_policy, key_value = jax.random.split(key)
    params = {
        "policy": init_mlp(key_policy, (obs_size, *policy_hidden, 2 * action_size)),
        "value": init_mlp(key_value, (obs_size, *critic_hidden, 1)),
    }
    if with_cost_critic:
        params["cost_value"] = init_mlp(key_value, (obs_size, *critic_hidden, 1))
    return params


def mlp_flops_per_input(sizes: tuple) -> int:
    """Forward FLOPs (2 per multiply-add) of one input through dense layers of these sizes."""
    return sum(2 * a * b for a, b in zip(sizes[:-1], sizes[1:]))
