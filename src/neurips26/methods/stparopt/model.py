"""STParOpt's learned part: a static relational GNN, cross-attention to access-site tokens, and the
entropy-gated fusion.

Static branch: node embedding ``h0 = E[type] + W f`` -> L relational GCN layers (torch-geometric
``RGCNConv``) -> mean/max pooling -> static logits ``z_s``; its predictive entropy
``H_s = -sum_c p_c log p_c`` with ``p = softmax(z_s)``.

Dynamic branch (paper: "augments static program graphs with stride-level execution features via
cross-attention"): tokens ``t_k = W_t phi_k + h_site(k)``; static node embeddings query them,
``A = softmax(H W_q (T W_k)^T / sqrt(d)) T W_v``; mean/max-pooled ``A`` gives fused logits ``z_f``.

Fusion (paper: "up-weights dynamic evidence when the static branch's entropy is high"):
``g = 1[H_s > tau] * sigmoid(alpha (H_s - tau))``, ``z = (1 - g) z_s + g z_f``. The indicator is ours:
it makes "profile only when H_s > tau" exact at training and inference alike.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.data import Batch, Data
from torch_geometric.nn import RGCNConv, global_max_pool, global_mean_pool
from torch_geometric.utils import to_dense_batch

from neurips26.methods.stparopt.graphs import N_NODE_FEATURES, N_RELATIONS, N_TOKEN_FEATURES, VOCAB


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Predictive entropy in nats of ``softmax(logits)``; (B, C) -> (B,)."""
    log_p = F.log_softmax(logits, dim=-1)
    return -(log_p.exp() * log_p).sum(-1)


def entropy_gate(h_static: torch.Tensor, tau: float, alpha: float) -> torch.Tensor:
    """``g = 1[H_s > tau] sigmoid(alpha (H_s - tau))``; tau = +inf shuts the gate (g = 0 exactly)."""
    if tau == float("inf"):
        return torch.zeros_like(h_static)
    return (h_static > tau).float() * torch.sigmoid(alpha * (h_static - tau))


class StaticGNN(nn.Module):
    """The static branch (also the Graph2Par-like static-only baseline when used alone)."""

    def __init__(self, hidden: int = 48, layers: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(len(VOCAB), hidden)
        self.numeric = nn.Linear(N_NODE_FEATURES, hidden)
        self.convs = nn.ModuleList(RGCNConv(hidden, hidden, N_RELATIONS) for _ in range(layers))
        self.head = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def nodes(self, batch: Batch) -> torch.Tensor:
        """Node embeddings (N, hidden); cost linear in nodes + edges."""
        h = self.embed(batch.x) + self.numeric(batch.feat)
        for conv in self.convs:
            h = h + F.relu(conv(h, batch.edge_index, batch.edge_type))
        return h

    def pool(self, h: torch.Tensor, batch: Batch) -> torch.Tensor:
        return torch.cat([global_mean_pool(h, batch.batch), global_max_pool(h, batch.batch)], dim=-1)

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.head(self.pool(self.nodes(batch), batch))


class CrossAttentionFusion(nn.Module):
    """Static node embeddings query access-site tokens (plus one learned null token per loop)."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.token = nn.Linear(N_TOKEN_FEATURES, hidden)
        self.null = nn.Parameter(torch.zeros(1, 1, hidden))
        self.attention = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.head = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def forward(self, h: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Fused logits (B, 2) from the attended evidence only: the static embeddings choose *which*
        tokens each node reads (queries, and the site embedding added to each token); the values are the
        execution tokens. (Feeding the static pooled embedding too let the head ignore the evidence on
        training loops the static branch had already fitted.)"""
        tokens = self.token(batch.tokens) + h[batch.site_index]  # t_k = W_t phi_k + h_site(k)
        dense_tokens, token_mask = to_dense_batch(tokens, batch.tokens_batch, batch_size=batch.num_graphs)
        null = self.null.expand(batch.num_graphs, 1, -1)
        keys = torch.cat([null, dense_tokens], dim=1)
        pad = torch.cat([torch.zeros(batch.num_graphs, 1, dtype=torch.bool), ~token_mask], dim=1)
        queries, node_mask = to_dense_batch(h, batch.batch, batch_size=batch.num_graphs)
        attended, _ = self.attention(queries, keys, keys, key_padding_mask=pad)
        mixed = attended[node_mask]  # (N, hidden): per node, a mixture of access-site tokens
        pooled = torch.cat(
            [global_mean_pool(mixed, batch.batch), global_max_pool(mixed, batch.batch)], dim=-1
        )
        return self.head(pooled)


class STParOptModel(nn.Module):
    """Static GNN + cross-attention + entropy-gated fusion. ``forward`` returns a dict with
    ``logits`` (B, 2), ``static`` (B, 2), ``fused`` (B, 2), ``entropy`` (B,), ``gate`` (B,)."""

    def __init__(
        self, hidden: int = 48, layers: int = 3, heads: int = 4, tau: float = 0.35, alpha: float = 12.0
    ) -> None:
        super().__init__()
        self.static = StaticGNN(hidden, layers)
        self.fusion = CrossAttentionFusion(hidden, heads)
        self.tau, self.alpha = tau, alpha

    def forward(self, batch: Batch, use_dynamic: bool = True) -> dict[str, torch.Tensor]:
        h = self.static.nodes(batch)
        pooled = self.static.pool(h, batch)
        static = self.static.head(pooled)
        h_s = entropy(static)
        gate = entropy_gate(h_s.detach(), self.tau, self.alpha)
        if not use_dynamic or not bool((gate > 0).any()):
            return {"logits": static, "static": static, "fused": static, "entropy": h_s, "gate": gate}
        fused = self.fusion(h, batch)
        logits = (1 - gate)[:, None] * static + gate[:, None] * fused  # z = (1 - g) z_s + g z_f
        return {"logits": logits, "static": static, "fused": fused, "entropy": h_s, "gate": gate}


class DynamicOnly(nn.Module):
    """Ablation: the access-site tokens alone (DeepSets mean/max pooling), profiling every loop."""

    def __init__(self, hidden: int = 48) -> None:
        super().__init__()
        self.encode = nn.Sequential(nn.Linear(N_TOKEN_FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.head = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def forward(self, batch: Batch) -> torch.Tensor:
        t = self.encode(batch.tokens)
        mean = torch.zeros(batch.num_graphs, t.shape[1]).index_add_(0, batch.tokens_batch, t)
        counts = torch.bincount(batch.tokens_batch, minlength=batch.num_graphs).clamp(min=1)[:, None]
        rows = batch.tokens_batch[:, None].expand_as(t)  # scatter_reduce: index_reduce's stable equivalent
        peak = torch.full((batch.num_graphs, t.shape[1]), -1e4).scatter_reduce_(0, rows, t, reduce="amax")
        return self.head(torch.cat([mean / counts, peak.clamp(min=-1e3)], dim=-1))


class ConcatFusion(nn.Module):
    """Ablation: static pooled embedding concatenated with pooled tokens, no attention, no gate."""

    def __init__(self, hidden: int = 48, layers: int = 3) -> None:
        super().__init__()
        self.static = StaticGNN(hidden, layers)
        self.dynamic = DynamicOnly(hidden)
        self.head = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def forward(self, batch: Batch) -> torch.Tensor:
        pooled = self.static.pool(self.static.nodes(batch), batch)
        t = self.dynamic.encode(batch.tokens)
        mean = torch.zeros(batch.num_graphs, t.shape[1]).index_add_(0, batch.tokens_batch, t)
        counts = torch.bincount(batch.tokens_batch, minlength=batch.num_graphs).clamp(min=1)[:, None]
        return self.head(torch.cat([pooled, mean / counts], dim=-1))


def make_batch(graphs: list[Data]) -> Batch:
    """Collate graphs carrying ``tokens`` (S, F) and ``site_index`` (S,) into one batch."""
    return Batch.from_data_list(graphs, follow_batch=["tokens"])


def train_classifier(
    model: nn.Module,
    graphs: list[Data],
    labels: torch.Tensor,
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int,
    loss_fn=None,
    parameters=None,
) -> nn.Module:
    """Adam on cross-entropy (or ``loss_fn(model, batch, y)``) over shuffled mini-batches."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(parameters if parameters is not None else model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(graphs), generator=generator)
        for start in range(0, len(graphs), batch_size):
            chunk = tuple(order[start : start + batch_size].tolist())
            batch = make_batch([graphs[k] for k in chunk])
            y = labels[list(chunk)]
            loss = loss_fn(model, batch, y) if loss_fn is not None else F.cross_entropy(model(batch), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()
    return model


def fit_stparopt(
    model: STParOptModel,
    graphs: list[Data],
    labels: torch.Tensor,
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int,
    static_ready: bool = False,
) -> STParOptModel:
    """Stage 1: the static branch alone (CE on z_s). Stage 2: static weights frozen, the cross-attention
    and fused head trained on CE(z_f) + CE(z) over the loops the gate opens (all loops are profiled at
    training time). Freezing keeps the static branch identical to the static-only GNN.
    ``static_ready=True`` skips stage 1 (the static branch was loaded from a trained static GNN)."""
    if not static_ready:
        train_classifier(model.static, graphs, labels, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed)
    for p in model.static.parameters():
        p.requires_grad_(False)

    def loss(m: STParOptModel, batch: Batch, y: torch.Tensor) -> torch.Tensor:
        h = m.static.nodes(batch)
        pooled = m.static.pool(h, batch)
        static = m.static.head(pooled)
        fused = m.fusion(h, batch)
        gate = entropy_gate(entropy(static), m.tau, m.alpha)
        logits = (1 - gate)[:, None] * static + gate[:, None] * fused
        return F.cross_entropy(fused, y) + F.cross_entropy(logits, y)

    train_classifier(
        model,
        graphs,
        labels,
        epochs=epochs,
        lr=lr,
        batch_size=batch_size,
        seed=seed + 1,
        loss_fn=loss,
        parameters=model.fusion.parameters(),
    )
    for p in model.static.parameters():
        p.requires_grad_(True)
    return model
