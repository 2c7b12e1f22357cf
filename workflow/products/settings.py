"""The `products` configuration: plot and table settings, with defaults and a clear error
for a bad value. The defaults are SHARED below plus what each product module declares
(`Product.settings`, checked by its `check`). None of these reach the training or metrics
rules, so changing one reruns only the products that read it (Snakemake's params trigger)."""
from __future__ import annotations

import copy

# Settings several products read (a product names the ones it reads in `Product.shared`).
SHARED = {
    "baseline": "ppo",              # the unconstrained baseline: never bold in the tables
    "bold": "paper",                # paper: best per column among non-baseline algorithms; safe: also tier >= 1
    "decimals": {"R": 1, "C": 1, "Dnorm": 2, "V": 2, "Dnorm_plus": 2},
    "font_size": 9,
    "dpi": 150,
}
# Mappings whose keys are the user's to add (any metric; any tier.metric threshold).
OPEN = ("products.decimals", "products.sensitivity.ranges")


def defaults(table=None) -> dict:
    """SHARED plus every product's own settings (workflow/products/catalog/)."""
    from .registry import products

    out = copy.deepcopy(SHARED)
    for product in products() if table is None else table:
        for key, value in product.settings.items():
            if key in out and not (isinstance(value, dict) and isinstance(out[key], dict)):
                raise ValueError(f"product {product.name}: setting {key!r} is declared by another product "
                                 f"or shared; pick another name")
            if isinstance(value, dict):
                clash = sorted(set(value) & set(out.get(key, {})))
                if clash:
                    raise ValueError(f"product {product.name}: setting {key}.{clash[0]} is declared twice")
                out[key] = {**out.get(key, {}), **copy.deepcopy(value)}
            else:
                out[key] = copy.deepcopy(value)
    return out


def _coerce(value, default):
    """Numbers given as text (Snakemake's `--config key={...}` passes nested values as strings)."""
    if isinstance(value, str) and isinstance(default, (int, float)) and not isinstance(default, bool):
        for kind in (int, float):
            try:
                return kind(value)
            except ValueError:
                pass
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return [_coerce(v, 0.0) for v in value]
    return value


def _merge(base: dict, override: dict, where: str) -> dict:
    out = copy.deepcopy(base)
    for key, value in (override or {}).items():
        if key not in base and where not in OPEN:
            raise ValueError(f"config {where}: unknown key {key!r}; known: {sorted(base)}")
        if isinstance(base.get(key), dict):
            if not isinstance(value, dict):
                raise ValueError(f"config {where}.{key}: expected a mapping, got {value!r}")
            out[key] = _merge(base[key], value, f"{where}.{key}")
        else:
            default = base.get(key, 0.0 if where in OPEN else None)
            out[key] = _coerce(value, default)
    return out


def positive_number(value, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"config products.{where}: expected a number > 0, got {value!r}")


def resolve(products: dict | None, table=None) -> dict:
    """Defaults overridden by the config's `products` mapping, checked by the shared rules
    and by each product's own `check`."""
    from .registry import products as product_table

    s = _merge(defaults(table), products or {}, "products")
    if s["bold"] not in ("paper", "safe"):
        raise ValueError(f"config products.bold: expected paper or safe, got {s['bold']!r}")
    for key in ("font_size", "dpi"):
        positive_number(s[key], key)
    for product in product_table() if table is None else table:
        if product.check is not None:
            product.check(s)
    return s
