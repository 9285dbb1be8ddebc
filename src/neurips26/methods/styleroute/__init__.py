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

__all__ = [
    "CONFORMANCE",
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
