"""The PyPI package inkan (fast uniform cubic B-spline KAN layers) as a kanscale implementation:
`model: {impl: [examples/inkan_kan.py:build]}` (config/own_kan.yaml).

inkan's KANNetwork takes `layer_dims` where kanscale says `widths`, so a two-line factory maps the
names. compile_basis=False: eager mode, as every other implementation of a study runs (torch.compile
would add a compile of tens of seconds to each point's start-up and needs a C compiler on the node).
inkan has cubic splines only: another model.spline_order is refused at plan time with inkan's reason.
"""

from inkan import KANNetwork


def build(widths, grid_size, spline_order, grid_range):
    return KANNetwork(list(widths), grid_size=grid_size, spline_order=spline_order, grid_range=tuple(grid_range),
                      compile_basis=False)
