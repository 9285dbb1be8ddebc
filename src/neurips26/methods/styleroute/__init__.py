"""StyleRoute: region-aware diffusion stylisation with an explicit, visible routing map.

``StyleRoutePipeline(unet, scheduler)(content, style, budget=0.5, generator=g)`` returns
``StyleRouteOutput(images, routing_map, regions)``; :class:`RegionRouter` is the "where" on its own;
:class:`SingleImagePrior` is the small diffusers denoiser trained here per style
(``neurips26 styleroute train-prior STYLE``); :class:`StyleRouteAttnProcessor` is the optional StyleID-style
key/value injection with per-token routing weights.
"""

from neurips26.methods.styleroute.attention import InjectionController, StyleRouteAttnProcessor
from neurips26.methods.styleroute.config import StyleRouteConfig
from neurips26.methods.styleroute.pipeline import (
    RouteInputs,
    StyleRouteOutput,
    StyleRoutePipeline,
    save_routing,
)
from neurips26.methods.styleroute.prior import SingleImagePrior
from neurips26.methods.styleroute.router import RegionRouter, Routing
from neurips26.methods.styleroute.training import load_prior, make_scheduler, train_prior

#: Ecosystem families the public API conforms to (``neurips26.testing.conformance``).
CONFORMANCE: tuple[tuple[str, str], ...] = (
    ("pipeline", "neurips26.methods.styleroute.conformance:tiny_pipeline"),
)

#: Each central idea -> the test that switches it off and must then fail (pytest node id, from the
#: repository root); each runs the public ``StyleRoutePipeline``; the README's "Central ideas" table says
#: how each is switched off.
IDEAS: dict[str, str] = {
    "where: r from structure/texture confidences decides where the output is stylised": (
        "tests/methods/styleroute/test_styleroute_ideas.py::test_idea_pipeline_routes_and_stylises_texture_more_than_structure"
    ),
    "where: the route disagreement D enters the routing": (
        "tests/methods/styleroute/test_styleroute_ideas.py::test_idea_pipeline_routing_uses_the_route_disagreement"
    ),
    "how: region-wise start time protects r = 0 regions": (
        "tests/methods/styleroute/test_styleroute.py::test_idea_region_wise_start_time_protects_r0_regions"
    ),
    "how: ILVR anchors the coarse layout where r is low": (
        "tests/methods/styleroute/test_styleroute.py::test_idea_ilvr_anchors_the_low_pass_layout_where_r_is_low"
    ),
    "how: r-weighted style guidance moves the output toward the style": (
        "tests/methods/styleroute/test_styleroute.py::test_idea_style_guidance_lowers_the_guidance_style_loss"
    ),
}

__all__ = [
    "CONFORMANCE",
    "IDEAS",
    "InjectionController",
    "RegionRouter",
    "RouteInputs",
    "Routing",
    "SingleImagePrior",
    "StyleRouteAttnProcessor",
    "StyleRouteConfig",
    "StyleRouteOutput",
    "StyleRoutePipeline",
    "load_prior",
    "make_scheduler",
    "save_routing",
    "train_prior",
]
