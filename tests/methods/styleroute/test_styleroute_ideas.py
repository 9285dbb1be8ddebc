"""StyleRoute's "where" idea guarded through the public pipeline (the other guards are in
test_styleroute.py): the routing the pipeline infers decides where the output is stylised."""

from __future__ import annotations

import numpy as np
import torch

from neurips26.methods.styleroute.pipeline import to_images, to_tensor
from tests.methods.styleroute_helpers import half_structure_half_texture, images, tiny_pipeline

torch.set_num_threads(1)


def test_idea_pipeline_routes_and_stylises_texture_more_than_structure() -> None:
    """Idea "where": on an image whose left half is structure (strong edges) and right half texture, the
    pipeline's own routing puts r high on the texture and low on the structure, and the output therefore
    changes more on the texture half.

    Switched off (made this test fail: r gap 0.0, change ratio 1.06 instead of 0.34 and 1.30): the
    pipeline's ``RegionRouter`` built with ``route_mode="uniform"``.
    """
    image, right = half_structure_half_texture()
    style = images(3, size=48)[0]
    out = tiny_pipeline()(image[None], style, budget=0.5, generator=torch.Generator().manual_seed(0))
    routing = out.routing_map[0]
    assert routing[right].mean() > routing[~right].mean() + 0.15
    change = np.abs(out.images[0] - to_images(to_tensor(image[None]))[0]).mean(-1)
    assert change[right].mean() > 1.18 * change[~right].mean(), (change[right].mean(), change[~right].mean())


def test_idea_pipeline_routing_uses_the_route_disagreement() -> None:
    """Idea "where", its third input: the route disagreement D that the pipeline measures with its two
    probe routes changes the routing it infers (protecting where the routes differ).

    Switched off (made this test fail): ``StyleRoutePipeline.route_inputs`` returning no disagreement.
    """
    content, style = images(4), images(5)[0]
    maps = {}
    for mode in ("full", "no_disagreement"):
        generator = torch.Generator().manual_seed(0)
        out = tiny_pipeline(route_mode=mode)(content, style, budget=0.5, generator=generator)
        maps[mode] = out.routing_map[0]
    assert np.abs(maps["full"] - maps["no_disagreement"]).mean() > 0.02
