"""Shared machinery with no method-specific knowledge: configs, seeding, measurement, files, checks."""

from neurips26.core.config import (
    apply_overrides,
    config_from_dict,
    config_hash,
    config_to_dict,
    field_sources,
    param,
    parse_override,
)
from neurips26.core.files import atomic_write_json, atomic_write_text
from neurips26.core.measure import measured, peak_rss_mb

__all__ = [
    "apply_overrides",
    "atomic_write_json",
    "atomic_write_text",
    "config_from_dict",
    "config_hash",
    "config_to_dict",
    "field_sources",
    "measured",
    "param",
    "parse_override",
    "peak_rss_mb",
]
