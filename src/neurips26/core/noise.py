"""Third-party noise, silenced once at its source: installed when ``neurips26`` is imported.

Every run used to start with four lines nobody can act on, and a log without a terminal got transformers'
"Loading weights" bar as one 29,000-character line per model load. The filters below drop exactly those
known messages (anything else a library logs still shows), and third-party progress bars are switched off
where ours are (no terminal, or CI) and for the whole of ``neurips26 run`` (its own bar and heartbeat
report progress; a worker's bar would tear through them). Our own heartbeat is untouched.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["KNOWN_NOISE", "silence_third_party_noise"]

# logger name -> the start of each message dropped from it, and why it is noise here
KNOWN_NOISE: dict[str, tuple[str, ...]] = {
    # torchao 0.18 tries its CUDA-only extensions (MXFP8, CUTLASS sm90a) on import; a CPU build cannot load
    # them and semanticdialect uses torchao's emulated casts, which do not need them
    "torchao": ("Failed to load ",),
    # torch 2.13 deprecates torchao's register_constant() on its own Enums (KernelPreference, ...)
    "torch.utils._pytree": ("%s is an Enum subclass and is now natively supported",),
    # diffusers 0.42 registers torchao tensor classes that torchao 0.18 no longer has; nothing here loads a
    # torchao-serialized diffusers checkpoint
    "diffusers.quantizers.torchao.torchao_quantizer": ("Unable to import `torchao` Tensor objects",),
}
PROGRESS_BARS_ENV = "HF_HUB_DISABLE_PROGRESS_BARS"  # read by huggingface_hub, hence by transformers


class _DropKnownNoise(logging.Filter):
    def __init__(self, prefixes: tuple[str, ...]) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(self.prefixes))


def _third_party_bars_wanted() -> bool:
    """The same rule as our own bars (``neurips26.bench.progress``): a terminal, and not CI."""
    return sys.stderr.isatty() and not os.environ.get("CI")


def silence_third_party_noise(progress_bars: bool | None = None) -> None:
    """Drop the known third-party log lines; switch off third-party progress bars unless wanted.

    ``progress_bars``: None decides by the terminal (off without one, and in CI); False switches them
    off (``neurips26 run``). A user's own ``HF_HUB_DISABLE_PROGRESS_BARS`` is respected. Safe to call
    repeatedly; the environment variable reaches worker processes started afterwards.
    """
    for name, prefixes in KNOWN_NOISE.items():
        logger = logging.getLogger(name)  # the same object the library gets when it is imported later
        if not any(isinstance(f, _DropKnownNoise) for f in logger.filters):
            logger.addFilter(_DropKnownNoise(prefixes))
    if progress_bars is None:
        progress_bars = _third_party_bars_wanted()
    if progress_bars or os.environ.setdefault(PROGRESS_BARS_ENV, "1") != "1":
        return
    # huggingface_hub reads the variable once, at its import: switch off what is already imported too
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
