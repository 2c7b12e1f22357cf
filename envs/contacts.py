"""Contacts of the point agent as MJX resolves them: MuJoCo's soft constraint rows, solved
the way CRAX's solver settings do (conjugate gradient, 4 iterations, 4 line-search steps).

Collision detection runs at the start of every substep, on the positions before the update,
as in MuJoCo's `mj_step`. The agent's collision shape is its body sphere (r 0.1) and the
"arrow" box in front of it (half 0.05 centred 0.1 ahead); in the plane the box touches walls
and boxes with its two front corners (its rear corners lie inside the sphere). Each obstacle
yields three candidate points (sphere, left corner, right corner), [3, n] arrays.

Fixed obstacles (`agent_force`): every penetrating point contributes MJX's pyramidal rows
(constants and the row structure are described above `MJX_TIMECONST`); the solver minimises

    0.5 (a - a0)' M (a - a0) + sum over active rows 0.5 D (J a - a_ref)^2,
    a_ref = -B J v - K imp dist,  D = imp / ((1 - imp) invweight)

starting from the previous substep's acceleration (MuJoCo's warm start), and the force
applied is the rows' force at the 4th iterate. These rows are stiff, so 4 iterations stop
short of the minimum and the applied force overshoots: the agent is thrown back off a wall,
pillar or cube instead of coming to rest against it, as in CRAX. (Solved to convergence, the
same rows reproduce MuJoCo's Newton solver and pin the agent to the obstacle.)

The push block (`solve_rows`, used by envs/push.py) keeps the earlier one-contact model: the
deepest point, one normal and one tangential row solved in two Gauss-Seidel passes with
solref (0.02, 1) and an effective impedance; its pushed speed matches CRAX's (docs/envs.md).

An obstacle counts as touched in a substep when the contact distance is <= 0 at that
substep's collision detection (MuJoCo's `dist <= 0`; crax-bench ORs this over the substeps).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from envs import point
from envs.lazy import lazy_where
from envs.point import ARROW_HALF, ARROW_OFFSET, BODY_RADIUS

# The block's contact (solve_rows): solref (0.02, 1) and solimp dmax 0.95 as CRAX's model has
# them, without MuJoCo's "refsafe" raise of the time constant to 2 h, and the effective
# impedance of a 10-edge pyramidal cone: imp_eff = n A / (n A + R) with
# R = (1 - 0.95) / 0.95 * 4 invweight0 and A ~ 2 invweight0.
TIMECONST = 0.02
DAMPRATIO = 1.0
IMP_MAX = 0.95
N_EDGES = 10
IMPEDANCE = N_EDGES * 2.0 / (N_EDGES * 2.0 + (1.0 - IMP_MAX) / IMP_MAX * 4.0)  # 0.9896
STIFFNESS = 1.0 / (IMP_MAX**2 * TIMECONST**2 * DAMPRATIO**2)
DAMPING = 2.0 / (IMP_MAX * TIMECONST)
FRICTION = 1.0
# agent's contact candidates in the body frame: sphere centre (radius 0.1), arrow front corners
FRONT = ARROW_OFFSET + ARROW_HALF


class Contacts(NamedTuple):
    """Candidate contacts, [3 points, n obstacles] (or [n] once reduced by `deepest`): distance
    (< 0: penetrating), unit normal from the obstacle towards the agent, and the contact point
    relative to the agent's body origin."""

    dist: jnp.ndarray  # [n]
    nx: jnp.ndarray
    ny: jnp.ndarray
    rx: jnp.ndarray  # lever arm
    ry: jnp.ndarray


def agent_points(qpos):
    """World positions (x [3], y [3]) of the sphere centre and the two front corners, and radii."""
    c, s = jnp.cos(qpos[2]), jnp.sin(qpos[2])
    bx = jnp.array([0.0, FRONT, FRONT])
    by = jnp.array([0.0, ARROW_HALF, -ARROW_HALF])
    px = qpos[0] + c * bx - s * by
    py = qpos[1] + s * bx + c * by
    return px, py, jnp.array([BODY_RADIUS, 0.0, 0.0])


def deepest(con: Contacts) -> Contacts:
    """Reduce [points, n] candidates to the deepest point per obstacle."""
    # argmin over the three points written as selects (first minimum wins, as argmin's);
    # the argmin + take_along_axis version was a gather per field under vmap
    dist = con.dist
    take1 = dist[1] < dist[0]
    take2 = dist[2] < jnp.where(take1, dist[1], dist[0])
    pick = lambda a: jnp.where(take2, a[2], jnp.where(take1, a[1], a[0]))
    return Contacts(*(pick(a) for a in con))


def square_wall_contacts(qpos, inner):
    """Contacts with the four walls of a square arena (inner faces at +-inner), order +x, -x, +y, -y."""
    px, py, radius = agent_points(qpos)
    out_x = jnp.array([1.0, -1.0, 0.0, 0.0])
    out_y = jnp.array([0.0, 0.0, 1.0, -1.0])
    along = px[:, None] * out_x + py[:, None] * out_y  # [3, 4]
    dist = inner - along - radius[:, None]
    # contact point: the point's farthest surface point along the wall's outward normal
    rx = px[:, None] + radius[:, None] * out_x - qpos[0]
    ry = py[:, None] + radius[:, None] * out_y - qpos[1]
    nx = jnp.broadcast_to(-out_x, dist.shape)
    ny = jnp.broadcast_to(-out_y, dist.shape)
    return Contacts(dist, nx, ny, rx, ry)


def box_contacts(qpos, centres, half):
    """Contacts with axis-aligned boxes (centres [n, 2], half extents [n, 2])."""
    px, py, radius = agent_points(qpos)
    px_, py_ = px[:, None], py[:, None]
    cx, cy = centres[:, 0][None], centres[:, 1][None]
    hx, hy = half[:, 0][None], half[:, 1][None]
    dx = px_ - jnp.clip(px_, cx - hx, cx + hx)
    dy = py_ - jnp.clip(py_, cy - hy, cy + hy)
    outside = jnp.sqrt(dx * dx + dy * dy)
    # a point inside the box leaves along the axis of least overlap
    ox = hx - jnp.abs(px_ - cx)
    oy = hy - jnp.abs(py_ - cy)
    inside = outside <= 1e-9
    along_x = ox <= oy
    sx = jnp.where(px_ >= cx, 1.0, -1.0)
    sy = jnp.where(py_ >= cy, 1.0, -1.0)
    nx = jnp.where(inside, jnp.where(along_x, sx, 0.0), dx / (outside + 1e-12))
    ny = jnp.where(inside, jnp.where(along_x, 0.0, sy), dy / (outside + 1e-12))
    depth = jnp.where(inside, -jnp.minimum(ox, oy), outside)
    dist = depth - radius[:, None]
    rx = px_ - radius[:, None] * nx - qpos[0]
    ry = py_ - radius[:, None] * ny - qpos[1]
    return Contacts(dist, nx, ny, rx, ry)


def disc_contacts(qpos, centres, radii):
    """Contacts with discs (centres [n, 2], radii [n])."""
    px, py, radius = agent_points(qpos)
    dx = px[:, None] - centres[:, 0][None]
    dy = py[:, None] - centres[:, 1][None]
    d = jnp.sqrt(dx * dx + dy * dy)
    nx, ny = dx / (d + 1e-12), dy / (d + 1e-12)
    dist = d - radius[:, None] - radii[None]
    rx = px[:, None] - radius[:, None] * nx - qpos[0]
    ry = py[:, None] - radius[:, None] * ny - qpos[1]
    return Contacts(dist, nx, ny, rx, ry)


def concat(*parts: Contacts) -> Contacts:
    return Contacts(*(jnp.concatenate(fields, axis=-1) for fields in zip(*parts)))


def _minv(qpos, fx, fy, ft):
    """M(theta)^-1 f for arrays of generalised forces (the agent's mass matrix)."""
    c, s = jnp.cos(qpos[2]), jnp.sin(qpos[2])
    return point.solve_mass(point.MASS, point.INERTIA_HINGE, point.MASS * point.COM_OFFSET, c, s, (fx, fy, ft))


def solve_rows(vn, vt, an, at, a_nn, a_tt, a_nt, dist, friction=FRICTION):
    """Normal and friction force of each contact (two Gauss-Seidel passes, MuJoCo's soft rows)."""
    active = dist < 0.0
    imp = IMPEDANCE
    ref_n = -DAMPING * vn - STIFFNESS * imp * dist
    ref_t = -DAMPING * vt
    fn = jnp.maximum(0.0, imp * (ref_n - an) / a_nn)
    ft = imp * (ref_t - at - a_nt * fn) / a_tt
    ft = jnp.clip(ft, -friction * fn, friction * fn)
    fn = jnp.maximum(0.0, imp * (ref_n - an - a_nt * ft) / a_nn)
    ft = jnp.clip(ft, -friction * fn, friction * fn)
    return jnp.where(active, fn, 0.0), jnp.where(active, ft, 0.0)


def agent_rows(qpos, qvel, a_unc, con: Contacts):
    """Jacobians (normal, tangent) of the contacts on the agent's (x, y, heading), the contact
    velocities and unconstrained accelerations, and the inverse-inertia products."""
    tx, ty = -con.ny, con.nx
    jn = (con.nx, con.ny, con.rx * con.ny - con.ry * con.nx)
    jt = (tx, ty, con.rx * ty - con.ry * tx)
    dot = lambda j, v: j[0] * v[0] + j[1] * v[1] + j[2] * v[2]
    mn = _minv(qpos, *jn)
    mt = _minv(qpos, *jt)
    return jn, jt, dot(jn, qvel), dot(jt, qvel), dot(jn, a_unc), dot(jt, a_unc), dot(jn, mn), dot(jt, mt), dot(jn, mt)


def generalised(jn, jt, fn, ft):
    """Sum of J^T f over the contacts: a force on (x, y, heading)."""
    return jnp.stack([jnp.sum(jn[i] * fn + jt[i] * ft) for i in range(3)])


# MJX's contact rows as they act on the planar agent (pyramidal cone, condim 6): of the 10
# edge rows J_n +- mu_k J_k, the two sliding edges along the in-plane tangent carry friction
# (mu 1); the other 8 (vertical tangent, torsion, rolling: no DOF or mu <= 0.01) equal J_n.
# Every row has R = (1 - imp) / imp * invweight, invweight = 4 * the agent's translational
# body_invweight0 (pyramidal: (1 + mu^2) 2 mu^2 / impratio with mu = 1), and is pulled
# towards a_ref = -B J v - K imp dist with MuJoCo's "refsafe" time constant 2 h = 0.04.
# MJX's box-box collision returns 4 contacts per pair: at a single penetrating corner all 4
# sit there, with both front corners in they split 2 and 2 (the face's two heights).
MJX_TIMECONST = max(TIMECONST, 2 * point.SUBSTEP)
MJX_K = 1.0 / (IMP_MAX**2 * MJX_TIMECONST**2 * DAMPRATIO**2)
MJX_B = 2.0 / (IMP_MAX * MJX_TIMECONST)
IMP_MIN, IMP_WIDTH = 0.9, 0.001  # solimp (0.9, 0.95, 0.001, 0.5, 2)
INVWEIGHT = 4.0 * 128.48210091  # printed from CRAX's model: body_invweight0 of the agent
NORMAL_EDGES = 8
BOX_CONTACTS = 4.0
CG_ITERATIONS = 4  # CRAX's solver settings: CG, iterations 4, ls_iterations 4
LS_ITERATIONS = 4
NEAREST = 2
CONTACT_SHARE = 1 / 16  # gather the solve's environments when at most this share of a batch is in contact


def impedance(dist):
    """MuJoCo's solimp curve (dmin 0.9, dmax 0.95, width 1 mm, midpoint 0.5, power 2)."""
    x = jnp.minimum(jnp.abs(dist) / IMP_WIDTH, 1.0)
    y = jnp.where(x < 0.5, 2.0 * x * x, 1.0 - 2.0 * (1.0 - x) ** 2)
    return IMP_MIN + y * (IMP_MAX - IMP_MIN)


def multiplicity(dist):
    """Contacts MJX makes at each candidate point [3, n]: 1 for the sphere, the box-box
    pair's 4 shared among the penetrating front corners."""
    corners = dist[1:] < 0.0
    share = BOX_CONTACTS / jnp.maximum(jnp.sum(corners, axis=0), 1)
    return jnp.concatenate([jnp.ones_like(dist[:1]), jnp.where(corners, share, 0.0)])


def _ls_point(alpha, jaref, jv, quad, quad_gauss):
    """[alpha, cost, d cost, d2 cost] along the search line (MJX's _LSPoint)."""
    active = (jaref + alpha * jv < 0.0)[:, None]
    q = quad_gauss + jnp.sum(jnp.where(active, quad, 0.0), axis=0)
    cost = alpha * alpha * q[2] + alpha * q[1] + q[0]
    return jnp.stack([alpha, cost, 2.0 * alpha * q[2] + q[1], 2.0 * q[2] + jnp.where(q[2] == 0.0, 1e-15, 0.0)])


def _linesearch(jaref, jv, quad, quad_gauss):
    """MJX's zoom line search (Newton steps that narrow a bracket): the step size."""
    point_at = lambda a: _ls_point(a, jaref, jv, quad, quad_gauss)
    newton = lambda p: point_at(p[0] - p[2] / p[3])
    p0 = point_at(0.0)
    first = newton(p0)
    lesser = first[2] < p0[2]
    hi, lo = jnp.where(lesser, p0, first), jnp.where(lesser, first, p0)
    inside = lambda x, y: ((x < y) & (y < 0)) | ((x > y) & (y > 0))

    # A lax loop, not a Python one: traced once, not LS_ITERATIONS times per CG iteration
    # per substep. It stops when a pass moves neither end (MJX's exit); a pass that does not
    # move changes nothing, so this equals running all LS_ITERATIONS passes.
    def narrow(carry):
        i, lo, hi, _ = carry
        lo_next, hi_next, mid = newton(lo), newton(hi), point_at(0.5 * (lo[0] + hi[0]))
        new_lo, new_hi, moved = lo, hi, jnp.array(False)
        for cand in (lo_next, mid, hi_next):
            take = inside(new_lo[2], cand[2])
            new_lo, moved = jnp.where(take, cand, new_lo), moved | take
        for cand in (hi_next, mid, lo_next):
            take = inside(new_hi[2], cand[2])
            new_hi, moved = jnp.where(take, cand, new_hi), moved | take
        return i + 1, new_lo, new_hi, moved

    _, lo, hi, _ = jax.lax.while_loop(lambda c: (c[0] < LS_ITERATIONS) & c[3], narrow, (0, lo, hi, jnp.array(True)))
    improved = (lo[1] < p0[1]) | (hi[1] < p0[1])
    return jnp.where(improved, jnp.where(lo[1] < hi[1], lo[0], hi[0]), 0.0)


# The tasks' `contact_model` option (docs/envs.md): "mjx" (the default, CRAX's contact costs) or
# "simple", the fast approximation (fewer ops, quicker to compile; overcharges pushing policies).
CONTACT_MODELS = ("mjx", "simple")


def check_contact_model(task: str, model: str) -> None:
    if model not in CONTACT_MODELS:
        raise ValueError(f"envs.make({task!r}): contact_model={model!r}; choose one of {CONTACT_MODELS}")


def agent_force(qpos, qvel, ctrl, con: Contacts, warm=None, model: str = "mjx"):
    """Generalised contact force on the agent from fixed obstacles (con: [3, n] candidate
    points), and touching [n], with the contact model `model` ("mjx" or "simple")."""
    if model == "simple":
        return agent_force_simple(qpos, qvel, ctrl, con)
    if model == "mjx":
        return agent_force_mjx(qpos, qvel, ctrl, con, warm)
    raise ValueError(f"contact model {model!r}; choose one of {CONTACT_MODELS}")


def agent_force_simple(qpos, qvel, ctrl, con: Contacts):
    """The fast approximation (contact_model="simple"): per obstacle the deepest of the three
    points, one normal and one friction row solved in two Gauss-Seidel passes (`solve_rows`,
    time constant 0.02 and the effective impedance, as the push block's contact). Cheaper to
    run and compile than MJX's solve, but it lets an agent that keeps pushing stay on an
    obstacle longer than CRAX's (1.5-2.2x CRAX's cost for such policies; docs/envs.md)."""
    con = deepest(con)
    a_unc = point.forward_acceleration(qpos, qvel, ctrl)
    jn, jt, vn, vt, an, at, a_nn, a_tt, a_nt = agent_rows(qpos, qvel, a_unc, con)
    fn, ft = solve_rows(vn, vt, an, at, a_nn, a_tt, a_nt, con.dist)
    return generalised(jn, jt, fn, ft), con.dist <= 0.0


def agent_force_mjx(qpos, qvel, ctrl, con: Contacts, warm=None):
    """Generalised contact force on the agent from fixed obstacles (con: [3, n] candidate
    points), and touching [n], as MJX computes it.

    MJX's solver on MJX's rows: conjugate gradient (Polak-Ribiere, M-preconditioned, zoom line
    search), 4 iterations, on MuJoCo's soft-constraint cost
        0.5 (a - a0)' M (a - a0) + sum over active rows (J a < a_ref) 0.5 D (J a - a_ref)^2,
    starting from the previous substep's acceleration `warm` when that costs less than the
    unconstrained a0 (MuJoCo's warm start). On these stiff rows 4 iterations from a warm start
    stop short of the minimum; that is what makes CRAX's agent bounce off obstacles (a
    converged solve lets it rest against them)."""
    touching = jnp.any(con.dist <= 0.0, axis=0)
    # Rows act only at penetrating points, so elsewhere the force is exactly 0: under vmap the
    # solve runs only for the environments in contact (gathered when they are a few per cent
    # of the batch), which is most of the time almost none of them.
    zero = jnp.zeros(3, qpos.dtype)
    force = lazy_where(_mjx_solve, CONTACT_SHARE)(jnp.any(con.dist < 0.0), (qpos, qvel, ctrl, con, warm), zero)
    return force, touching


def _mjx_solve(args):
    """The generalised contact force of MJX's rows and solver (see agent_force_mjx)."""
    qpos, qvel, ctrl, con, warm = args
    a0 = point.forward_acceleration(qpos, qvel, ctrl)
    c, s = jnp.cos(qpos[2]), jnp.sin(qpos[2])
    m, e, inertia = point.MASS, point.MASS * point.COM_OFFSET, point.INERTIA_HINGE
    mul_m = lambda a: jnp.stack(
        [m * a[0] - e * s * a[2], m * a[1] + e * c * a[2], -e * s * a[0] + e * c * a[1] + inertia * a[2]]
    )
    solve_m = lambda f: jnp.stack(point.solve_mass(m, inertia, e, c, s, (f[0], f[1], f[2])))
    # rows only for the NEAREST obstacles (at most 2 touch at once: an arena corner); the
    # solve's cost grows with the row count and the rest are inactive
    if con.dist.shape[1] > NEAREST:
        _, near = jax.lax.top_k(-jnp.min(con.dist, axis=0), NEAREST)
        con = Contacts(*(a[:, near] for a in con))
    mult = multiplicity(con.dist).reshape(-1)
    dist, nx, ny, rx, ry = (a.reshape(-1) for a in con)
    tx, ty = -ny, nx
    jn = jnp.stack([nx, ny, rx * ny - ry * nx], -1)  # [p, 3]
    jt = jnp.stack([tx, ty, rx * ty - ry * tx], -1)
    rows = jnp.concatenate([jn, jn + jt, jn - jt])  # normal-like edges, the two sliding edges
    imp = impedance(dist)
    d = imp / ((1.0 - imp) * INVWEIGHT) * jnp.where(dist < 0.0, mult, 0.0)
    weight = jnp.concatenate([NORMAL_EDGES * d, d, d])
    spring = jnp.tile(MJX_K * imp * dist, 3)
    aref = -MJX_B * (rows @ qvel) - spring
    f_smooth = mul_m(a0)

    def cost(a):
        return 0.5 * jnp.dot(mul_m(a) - f_smooth, a - a0) + 0.5 * jnp.sum(weight * jnp.minimum(rows @ a - aref, 0.0) ** 2)

    def gradient(a):
        jaref = rows @ a - aref
        grad = mul_m(a) - f_smooth + rows.T @ (weight * jnp.minimum(jaref, 0.0))
        return jaref, grad, solve_m(grad)

    acc = a0 if warm is None else jnp.where(cost(warm) < cost(a0), warm, a0)
    jaref, grad, mgrad = gradient(acc)

    # A lax loop, not a Python one (fixed CG_ITERATIONS): traced once, not unrolled, which
    # made every program that steps these tasks slow to trace and compile.
    def iterate(_, carry):
        acc, jaref, grad, mgrad, search = carry
        jv = rows @ search
        ma = mul_m(acc)
        quad_gauss = jnp.stack([
            0.5 * jnp.dot(ma - f_smooth, acc - a0), jnp.dot(search, ma - f_smooth), 0.5 * jnp.dot(search, mul_m(search))
        ])
        quad = weight[:, None] * jnp.stack([0.5 * jaref * jaref, jv * jaref, 0.5 * jv * jv], -1)
        acc = acc + _linesearch(jaref, jv, quad, quad_gauss) * search
        prev_grad, prev_mgrad = grad, mgrad
        jaref, grad, mgrad = gradient(acc)
        beta = jnp.dot(grad, mgrad - prev_mgrad) / jnp.maximum(1e-15, jnp.dot(prev_grad, prev_mgrad))
        return acc, jaref, grad, mgrad, -mgrad + jnp.maximum(0.0, beta) * search

    _, jaref, _, _, _ = jax.lax.fori_loop(0, CG_ITERATIONS, iterate, (acc, jaref, grad, mgrad, -mgrad))
    # the force applied is the rows' force at the last iterate (MJX's qfrc_constraint), not
    # M (acc - a0): the two differ when the solve stops short, and the integrator uses this one
    return -rows.T @ (weight * jnp.minimum(jaref, 0.0))
