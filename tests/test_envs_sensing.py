"""The vectorised sensing primitives against straightforward reference implementations."""
import jax
import jax.numpy as jnp
import numpy as np

from envs import sensing


def reference_lidar(rx, ry, max_dist, bins=sensing.LIDAR_BINS):
    """CRAX's aliased lidar, written the obvious way: integer bin, fraction, wrap-around."""
    out = np.zeros(bins)
    for x, y in zip(np.asarray(rx, np.float64), np.asarray(ry, np.float64)):
        dist = np.hypot(x, y)
        value = max(0.0, (max_dist - dist) / max_dist) if dist <= max_dist else 0.0
        position = (np.arctan2(y, x) % (2 * np.pi)) / (2 * np.pi / bins)
        b = int(np.floor(position)) % bins
        frac = position - np.floor(position)
        out[b] = max(out[b], value)
        out[(b + 1) % bins] = max(out[(b + 1) % bins], frac * value)
        out[(b - 1) % bins] = max(out[(b - 1) % bins], (1 - frac) * value)
    return out


def reference_nearest(rx, ry, k):
    rx, ry = np.asarray(rx, np.float64), np.asarray(ry, np.float64)
    order = np.argsort(rx * rx + ry * ry, kind="stable")[:k]
    norm = np.hypot(rx[order], ry[order]) + 1e-8
    out = np.zeros((k, 2))
    out[: len(order)] = np.stack([rx[order] / norm, ry[order] / norm], 1)
    return out.reshape(-1)


def test_angle_matches_arctan2_on_every_octant_and_the_axes():
    rng = np.random.default_rng(0)
    xy = rng.normal(size=(20000, 2)).astype(np.float32)
    axes = np.array([[1, 0], [0, 1], [-1, 0], [0, -1], [1, 1], [-1, 1], [-1, -1], [1, -1]], np.float32)
    xy = np.concatenate([xy, axes, 1e-6 * axes])
    got = np.asarray(jax.jit(sensing._angle)(xy[:, 1], xy[:, 0]))
    want = np.arctan2(xy[:, 1].astype(np.float64), xy[:, 0].astype(np.float64)) % (2 * np.pi)
    err = np.abs(got - want)
    err = np.minimum(err, 2 * np.pi - err)  # 0 and 2 pi are the same bin position
    assert err.max() < 2e-6
    assert np.all((got >= 0) & (got <= 2 * np.pi))


def test_scan_objects_matches_the_reference_lidar_and_offsets():
    rng = np.random.default_rng(1)
    scan = jax.jit(
        lambda a, h, o, m: sensing.scan_objects(a, h, o, (2, 16), 3.0, mask=m), static_argnums=()
    )
    for _ in range(50):
        agent = rng.uniform(-2.5, 2.5, 2).astype(np.float32)
        heading = np.float32(rng.uniform(-10, 10))
        objects = rng.uniform(-3, 3, (18, 2)).astype(np.float32)
        mask = rng.uniform(size=18) > 0.2
        (first, second), rx, ry = scan(agent, heading, objects, mask)
        c, s = np.cos(np.float64(heading)), np.sin(np.float64(heading))
        d = objects.astype(np.float64) - agent
        want_rx, want_ry = c * d[:, 0] + s * d[:, 1], -s * d[:, 0] + c * d[:, 1]
        np.testing.assert_allclose(rx, want_rx, atol=2e-5)
        np.testing.assert_allclose(ry, want_ry, atol=2e-5)
        np.testing.assert_allclose(first, reference_lidar(want_rx[:2][mask[:2]], want_ry[:2][mask[:2]], 3.0), atol=2e-5)
        np.testing.assert_allclose(second, reference_lidar(want_rx[2:][mask[2:]], want_ry[2:][mask[2:]], 3.0), atol=2e-5)


def test_lidar_hand_worked_aliasing():
    # an object 1.5 ahead and a quarter of a bin to the left: value 0.5 in bin 0, 0.125 in bin 1
    # and 0.375 (0.75 * 0.5) in bin 15
    angle = 0.25 * 2 * np.pi / 16
    rx, ry = jnp.array([1.5 * np.cos(angle)]), jnp.array([1.5 * np.sin(angle)])
    (lidar,), _, _ = sensing.scan_objects(jnp.zeros(2), jnp.float32(0.0), jnp.stack([rx, ry], 1), (1,), 3.0)
    want = np.zeros(16)
    want[0], want[1], want[15] = 0.5, 0.125, 0.375
    np.testing.assert_allclose(lidar, want, atol=1e-6)


def test_nearest_from_offsets_matches_a_stable_sort():
    rng = np.random.default_rng(2)
    fn = jax.jit(sensing.nearest_from_offsets, static_argnums=2)
    for n in (4, 8, 16):
        for _ in range(20):
            rx, ry = rng.uniform(-3, 3, (2, n)).astype(np.float32)
            np.testing.assert_allclose(fn(rx, ry, 8), reference_nearest(rx, ry, 8), atol=1e-6)
    # ties keep index order, like a stable argsort
    rx, ry = np.array([1.0, -1.0, 0.5], np.float32), np.zeros(3, np.float32)
    np.testing.assert_allclose(fn(rx, ry, 2), [1.0, 0.0, 1.0, 0.0], atol=1e-6)
