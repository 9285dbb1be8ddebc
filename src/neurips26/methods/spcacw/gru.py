"""A character GRU with flat parameters, batched over models: the Shakespeare task's model.

It has :class:`~neurips26.methods.spcacw.engine.FlatMLP`'s interface (``init``, ``forward``, ``loss``,
``gradient_and_variance``, ``grouped_gradients``, ``n_params``), so the in-process engine and the baselines
run it unchanged. Every (client, micro-batch) pair gets its own copy of the parameters in one batched
forward pass (``bmm`` over models), and one backward pass of the summed losses gives every copy's gradient:
the micro-batch gradients of all clients at the cost of one minibatch gradient each.
"""

from __future__ import annotations

import math

import torch

from neurips26.methods.spcacw.core import within_client_variance


class FlatGRU:
    """Embedding -> one GRU layer -> linear read-out of the last state; predicts the next character.

    Parameters
    ----------
    vocab : alphabet size (inputs and classes).
    embed : embedding width (LEAF's Shakespeare model: 8).
    hidden : GRU state width (LEAF uses two LSTM layers of 256; ours is small for one CPU core).
    """

    def __init__(self, vocab: int, embed: int = 8, hidden: int = 64) -> None:
        if min(vocab, embed, hidden) < 1:
            raise ValueError(f"vocab, embed and hidden must be >= 1, got {(vocab, embed, hidden)}")
        self.vocab, self.embed, self.hidden = int(vocab), int(embed), int(hidden)
        v, e, h = self.vocab, self.embed, self.hidden
        self.shapes = {"emb": (v, e), "w_ih": (3 * h, e), "w_hh": (3 * h, h), "b_ih": (3 * h,),
                       "b_hh": (3 * h,), "w_out": (v, h), "b_out": (v,)}  # fmt: skip
        self.n_params = sum(math.prod(s) for s in self.shapes.values())

    def _split(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        out, offset = {}, 0
        for key, shape in self.shapes.items():
            size = math.prod(shape)
            out[key] = theta[..., offset : offset + size].reshape(*theta.shape[:-1], *shape)
            offset += size
        return out

    def init(self, n_models: int, generator: torch.Generator) -> torch.Tensor:
        """(n_models, P): N(0, 1) embeddings, PyTorch's uniform +-1/sqrt(hidden) for the GRU and read-out."""
        bound = 1.0 / math.sqrt(self.hidden)
        parts = []
        for key, shape in self.shapes.items():
            size = math.prod(shape)
            if key == "emb":
                parts.append(torch.randn(n_models, size, generator=generator))
            else:
                parts.append((torch.rand(n_models, size, generator=generator) * 2 - 1) * bound)
        return torch.cat(parts, dim=1)

    def batched_logits(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``theta`` (M, P), ``x`` (M, B, L) character indices -> next-character logits (M, B, vocab)."""
        p = self._split(theta)
        m = theta.shape[0]
        # the input projection of every character, looked up per model: (M, vocab, 3H) -> (M, B, L, 3H)
        table = torch.baddbmm(p["b_ih"][:, None, :], p["emb"], p["w_ih"].transpose(1, 2))
        rows = (x + torch.arange(m, device=x.device)[:, None, None] * self.vocab).reshape(-1)
        inputs = table.reshape(m * self.vocab, -1)[rows].reshape(*x.shape, -1)
        w_hh = p["w_hh"].transpose(1, 2)
        h = torch.zeros(m, x.shape[1], self.hidden, dtype=theta.dtype)
        hd = self.hidden
        for t in range(x.shape[2]):
            gates = torch.baddbmm(p["b_hh"][:, None, :], h, w_hh)
            xi = inputs[:, :, t]
            r = torch.sigmoid(xi[..., :hd] + gates[..., :hd])
            z = torch.sigmoid(xi[..., hd : 2 * hd] + gates[..., hd : 2 * hd])
            n = torch.tanh(xi[..., 2 * hd :] + r * gates[..., 2 * hd :])
            h = n + z * (h - n)
        return torch.baddbmm(p["b_out"][:, None, :], h, p["w_out"].transpose(1, 2))

    def forward(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Logits (..., vocab) of one model ``theta`` (P,) on sequences ``x`` (..., L)."""
        lead = x.shape[:-1]
        flat = x.reshape(1, -1, x.shape[-1])
        return self.batched_logits(theta[None], flat).reshape(*lead, self.vocab)

    def loss(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of one model on one batch."""
        return torch.nn.functional.cross_entropy(self.forward(theta, x), y)

    def grouped_gradients(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``theta`` (C, P), ``x`` (C, G, b, L), ``y`` (C, G, b) -> (C, G, P): micro-batch mean gradients."""
        c, g, b = y.shape
        with torch.enable_grad():
            copies = theta.detach().repeat_interleave(g, 0).requires_grad_(True)  # (C*G, P)
            logits = self.batched_logits(copies, x.reshape(c * g, b, -1))
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, self.vocab), y.reshape(-1), reduction="sum"
            )
            (grad,) = torch.autograd.grad(loss / b, copies)
        return grad.reshape(c, g, -1)

    def gradient_and_variance(
        self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor, groups: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each model's minibatch gradient (C, P) and the micro-batch estimate of its variance (C,)."""
        c, batch = y.shape
        if batch % groups or groups < 1:
            raise ValueError(f"batch={batch} must be a multiple of groups={groups} >= 1")
        per = batch // groups
        grads = self.grouped_gradients(theta, x.reshape(c, groups, per, -1), y.reshape(c, groups, per))
        if groups == 1:
            return grads[:, 0], torch.full((c,), float("nan"), dtype=grads.dtype)
        return within_client_variance(grads)
