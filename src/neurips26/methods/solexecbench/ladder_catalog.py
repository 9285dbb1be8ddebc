"""SOL-ExecBench: Speed-of-Light Benchmarking for Real-World GPU Kernels Against Hardware Limits — ladders.

The honest ladder of the problems in :mod:`.problem_catalog`: per problem the destination-passing
signature, the output shapes (for the return-style red-team families) and three rung bodies — ``naive``
(Python loops over rows, taps or heads), ``eager`` (the reference's ops, copied into the outputs) and
``fused`` (fewer passes or temporaries: a library kernel, ``out=`` and in-place ops).
"""

from __future__ import annotations

# problem: (inputs, outputs)
CATALOG_SIGNATURES = {
    "linear_gelu": ("x, weight, bias", "y"),
    "batched_matmul": ("a, b", "c"),
    "grouped_gemm": ("x, weight, expert_index", "y"),
    "mha_attention": ("q, k, v", "o"),
    "gqa_decode_attention": ("q, k_cache, v_cache", "o"),
    "groupnorm": ("x, norm_weight, norm_bias", "y"),
    "add_rmsnorm": ("x, residual, norm_weight", "y, new_residual"),
    "layernorm_backward": ("x, dy, norm_weight", "dx, dweight, dbias"),
    "log_softmax": ("logits", "logprobs"),
    "gelu": ("x", "y"),
    "silu_and_mul": ("gate_up", "h"),
    "gated_mlp": ("x, w_gate, w_up, w_down", "y"),
    "column_sum": ("x", "total"),
    "row_argmax": ("logits", "index"),
    "conv1d": ("x, weight, bias", "y"),
    "conv2d": ("x, weight", "y"),
    "depthwise_conv2d": ("x, weight", "y"),
    "embedding": ("table, token_ids", "y"),
    "scatter_add": ("src, bucket_index", "out"),
    "rope": ("x, cos, sin", "y"),
    "topk": ("scores", "values, indices"),
    "cumsum": ("x", "y"),
    "kl_divergence": ("student_logits, teacher_logits", "loss"),
    "prenorm_mlp_block": ("x, norm_weight, w_gate, w_up, w_down", "y"),
}

# problem: the first output's shape as an expression of the inputs (return-style red-team families)
CATALOG_OUTPUT_SHAPES = {
    "linear_gelu": "(x.shape[0], weight.shape[0])",
    "batched_matmul": "(a.shape[0], a.shape[1], b.shape[2])",
    "grouped_gemm": "(x.shape[0], weight.shape[2])",
    "mha_attention": "tuple(q.shape)",
    "gqa_decode_attention": "tuple(q.shape)",
    "groupnorm": "tuple(x.shape)",
    "add_rmsnorm": "tuple(x.shape)",
    "layernorm_backward": "tuple(x.shape)",
    "log_softmax": "tuple(logits.shape)",
    "gelu": "tuple(x.shape)",
    "silu_and_mul": "(gate_up.shape[0], gate_up.shape[1] // 2)",
    "gated_mlp": "tuple(x.shape)",
    "column_sum": "(x.shape[1],)",
    "row_argmax": "(logits.shape[0],)",
    "conv1d": "(x.shape[0], weight.shape[0], x.shape[2])",
    "conv2d": "(x.shape[0], weight.shape[0], x.shape[2], x.shape[3])",
    "depthwise_conv2d": "tuple(x.shape)",
    "embedding": "(token_ids.shape[0], table.shape[1])",
    "scatter_add": "(256, src.shape[1])",
    "rope": "tuple(x.shape)",
    "topk": "(scores.shape[0], 8)",
    "cumsum": "tuple(x.shape)",
    "kl_divergence": "()",
    "prenorm_mlp_block": "tuple(x.shape)",
}

CATALOG_LADDER = {
    "linear_gelu": {
        "naive": """
            for i in range(x.shape[0]):
                y[i] = torch.nn.functional.gelu(weight @ x[i] + bias, approximate="tanh")
        """,
        "eager": """
            y.copy_(torch.nn.functional.gelu(x @ weight.t() + bias, approximate="tanh"))
        """,
        "fused": """
            torch.addmm(bias, x, weight.t(), out=y)
            y.copy_(torch.nn.functional.gelu(y, approximate="tanh"))
        """,
    },
    "batched_matmul": {
        "naive": """
            for i in range(a.shape[0]):
                for r in range(a.shape[1]):
                    c[i, r] = a[i, r] @ b[i]
        """,
        "eager": """
            c.copy_(torch.matmul(a, b))
        """,
        "fused": """
            torch.bmm(a, b, out=c)
        """,
    },
    "grouped_gemm": {
        "naive": """
            for i in range(x.shape[0]):
                y[i] = x[i] @ weight[expert_index[i]]
        """,
        "eager": """
            y.zero_()
            for e in range(weight.shape[0]):
                rows = (expert_index == e).nonzero().squeeze(-1)
                y.index_copy_(0, rows, x.index_select(0, rows) @ weight[e])
        """,
        "fused": """
            # sort tokens by expert once, then one contiguous GEMM per expert segment
            order = torch.argsort(expert_index, stable=True)
            counts = torch.bincount(expert_index, minlength=weight.shape[0]).tolist()
            xs = x.index_select(0, order)
            ys = torch.empty_like(y)
            start = 0
            for e, count in enumerate(counts):
                if count:
                    torch.mm(xs[start : start + count], weight[e], out=ys[start : start + count])
                start += count
            y.index_copy_(0, order, ys)
        """,
    },
    "mha_attention": {
        "naive": """
            scale = 1.0 / q.shape[-1] ** 0.5
            for h in range(q.shape[0]):
                for t in range(q.shape[1]):
                    o[h, t] = torch.softmax((k[h] @ q[h, t]) * scale, dim=-1) @ v[h]
        """,
        "eager": """
            s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
            o.copy_(torch.softmax(s, dim=-1) @ v)
        """,
        "fused": """
            o.copy_(torch.nn.functional.scaled_dot_product_attention(q, k, v))
        """,
    },
    "gqa_decode_attention": {
        "naive": """
            group = q.shape[0] // k_cache.shape[0]
            scale = 1.0 / q.shape[-1] ** 0.5
            for h in range(q.shape[0]):
                kh, vh = k_cache[h // group], v_cache[h // group]
                s = torch.stack([kh[t] @ q[h] for t in range(kh.shape[0])]) * scale
                o[h] = torch.softmax(s, dim=-1) @ vh
        """,
        "eager": """
            group = q.shape[0] // k_cache.shape[0]
            kk = k_cache.repeat_interleave(group, dim=0)
            vv = v_cache.repeat_interleave(group, dim=0)
            s = (kk @ q.unsqueeze(-1)).squeeze(-1) / q.shape[-1] ** 0.5
            o.copy_((torch.softmax(s, dim=-1).unsqueeze(1) @ vv).squeeze(1))
        """,
        "fused": """
            # no repeat of the cache: the group's queries share one [group, ctx] score matrix per KV head
            kv, group = k_cache.shape[0], q.shape[0] // k_cache.shape[0]
            qg = q.view(kv, group, q.shape[-1]) * q.shape[-1] ** -0.5
            s = torch.bmm(qg, k_cache.transpose(1, 2))
            torch.bmm(torch.softmax(s, dim=-1), v_cache, out=o.view(kv, group, q.shape[-1]))
        """,
    },
    "groupnorm": {
        "naive": """
            per = x.shape[1] // 8
            for b in range(x.shape[0]):
                for g in range(8):
                    span = slice(g * per, (g + 1) * per)
                    block = x[b, span]
                    mu = block.mean()
                    sd = torch.sqrt(((block - mu) ** 2).mean() + 1e-5)
                    y[b, span] = (block - mu) / sd * norm_weight[span, None] + norm_bias[span, None]
        """,
        "eager": """
            b, c, p = x.shape
            g = x.reshape(b, 8, -1)
            mean = g.mean(-1, keepdim=True)
            var = (g - mean).pow(2).mean(-1, keepdim=True)
            y.copy_(((g - mean) / torch.sqrt(var + 1e-5)).reshape(b, c, p) * norm_weight[:, None]
                    + norm_bias[:, None])
        """,
        "fused": """
            y.copy_(torch.nn.functional.group_norm(x, 8, norm_weight, norm_bias, 1e-5))
        """,
    },
    "add_rmsnorm": {
        "naive": """
            for i in range(x.shape[0]):
                h = x[i] + residual[i]
                new_residual[i] = h
                y[i] = h / torch.sqrt((h * h).mean() + 1e-6) * norm_weight
        """,
        "eager": """
            h = x + residual
            new_residual.copy_(h)
            y.copy_(h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * norm_weight)
        """,
        "fused": """
            torch.add(x, residual, out=new_residual)
            scale = torch.linalg.vector_norm(new_residual, dim=-1, keepdim=True).square_()
            torch.mul(new_residual, scale.div_(x.shape[-1]).add_(1e-6).rsqrt_(), out=y)
            y.mul_(norm_weight)
        """,
    },
    "layernorm_backward": {
        "naive": """
            dweight.zero_()
            dbias.zero_()
            for i in range(x.shape[0]):
                row = x[i]
                mu = row.mean()
                rstd = 1.0 / torch.sqrt(((row - mu) ** 2).mean() + 1e-5)
                xhat = (row - mu) * rstd
                g = dy[i] * norm_weight
                dx[i] = rstd * (g - g.mean() - xhat * (g * xhat).mean())
                dweight += dy[i] * xhat
                dbias += dy[i]
        """,
        "eager": """
            mean = x.mean(-1, keepdim=True)
            rstd = torch.rsqrt((x - mean).pow(2).mean(-1, keepdim=True) + 1e-5)
            xhat = (x - mean) * rstd
            g = dy * norm_weight
            dx.copy_(rstd * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True)))
            dweight.copy_((dy * xhat).sum(0))
            dbias.copy_(dy.sum(0))
        """,
        "fused": """
            var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
            rstd = var.add_(1e-5).rsqrt_()
            xhat = (x - mean).mul_(rstd)
            g = dy * norm_weight
            c1 = (g * xhat).mean(-1, keepdim=True)
            torch.sub(g, g.mean(-1, keepdim=True), out=dx)
            dx.sub_(xhat * c1).mul_(rstd)
            torch.sum(xhat.mul_(dy), 0, out=dweight)
            torch.sum(dy, 0, out=dbias)
        """,
    },
    "log_softmax": {
        "naive": """
            for i in range(logits.shape[0]):
                row = logits[i] - logits[i].max()
                logprobs[i] = row - torch.log(torch.exp(row).sum())
        """,
        "eager": """
            shifted = logits - logits.amax(-1, keepdim=True)
            logprobs.copy_(shifted - shifted.exp().sum(-1, keepdim=True).log())
        """,
        "fused": """
            torch.log_softmax(logits, dim=-1, out=logprobs)
        """,
    },
    "gelu": {
        "naive": """
            c = (2.0 / 3.141592653589793) ** 0.5
            for i in range(x.shape[0]):
                row = x[i]
                y[i] = 0.5 * row * (1.0 + torch.tanh(c * (row + 0.044715 * row * row * row)))
        """,
        "eager": """
            c = (2.0 / 3.141592653589793) ** 0.5
            y.copy_(0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x.pow(3)))))
        """,
        "fused": """
            y.copy_(torch.nn.functional.gelu(x, approximate="tanh"))
        """,
    },
    "silu_and_mul": {
        "naive": """
            d = h.shape[1]
            for i in range(gate_up.shape[0]):
                g = gate_up[i, :d]
                h[i] = g * torch.sigmoid(g) * gate_up[i, d:]
        """,
        "eager": """
            gate, up = gate_up.chunk(2, dim=-1)
            h.copy_(torch.nn.functional.silu(gate) * up)
        """,
        "fused": """
            d = h.shape[1]
            h.copy_(gate_up[:, :d])
            torch.nn.functional.silu(h, inplace=True)
            h.mul_(gate_up[:, d:])
        """,
    },
    "gated_mlp": {
        "naive": """
            for i in range(x.shape[0]):
                y[i] = (torch.nn.functional.silu(x[i] @ w_gate) * (x[i] @ w_up)) @ w_down
        """,
        "eager": """
            y.copy_((torch.nn.functional.silu(x @ w_gate) * (x @ w_up)) @ w_down)
        """,
        "fused": """
            g = x @ w_gate
            torch.nn.functional.silu(g, inplace=True)
            g.mul_(x @ w_up)
            torch.mm(g, w_down, out=y)
        """,
    },
    "column_sum": {
        "naive": """
            total.zero_()
            for i in range(x.shape[0]):
                total += x[i]
        """,
        "eager": """
            total.copy_(x.sum(0))
        """,
        "fused": """
            torch.sum(x, 0, out=total)
        """,
    },
    "row_argmax": {
        "naive": """
            for i in range(logits.shape[0]):
                index[i] = int(torch.argmax(logits[i]))
        """,
        "eager": """
            index.copy_(logits.argmax(-1))
        """,
        "fused": """
            torch.argmax(logits, dim=-1, out=index)
        """,
    },
    "conv1d": {
        "naive": """
            # shift-and-add over the 3 taps, one output channel at a time
            padded = torch.nn.functional.pad(x, (1, 1))
            length = x.shape[2]
            for o in range(weight.shape[0]):
                acc = bias[o] + torch.zeros(x.shape[0], length)
                for tap in range(weight.shape[2]):
                    acc += torch.einsum("bcl,c->bl", padded[:, :, tap : tap + length], weight[o, :, tap])
                y[:, o] = acc
        """,
        "eager": """
            # im2col: unfold the padded signal, one GEMM
            cols = torch.nn.functional.pad(x, (1, 1)).unfold(2, weight.shape[2], 1)  # [b, c, l, k]
            out = torch.einsum("bclk,ock->bol", cols, weight) + bias[None, :, None]
            y.copy_(out)
        """,
        "fused": """
            y.copy_(torch.nn.functional.conv1d(x, weight, bias, padding=1))
        """,
    },
    "conv2d": {
        "naive": """
            padded = torch.nn.functional.pad(x, (1, 1, 1, 1))
            h, w = x.shape[2], x.shape[3]
            y.zero_()
            for i in range(3):
                for j in range(3):
                    patch = padded[:, :, i : i + h, j : j + w]
                    for o in range(weight.shape[0]):
                        y[:, o] += torch.einsum("bchw,c->bhw", patch, weight[o, :, i, j])
        """,
        "eager": """
            b, c, h, w = x.shape
            cols = torch.nn.functional.unfold(x, 3, padding=1)  # [b, c*9, h*w]
            y.copy_((weight.reshape(weight.shape[0], -1) @ cols).reshape(b, -1, h, w))
        """,
        "fused": """
            y.copy_(torch.nn.functional.conv2d(x, weight, padding=1))
        """,
    },
    "depthwise_conv2d": {
        "naive": """
            padded = torch.nn.functional.pad(x, (1, 1, 1, 1))
            h, w = x.shape[2], x.shape[3]
            y.zero_()
            for c in range(x.shape[1]):
                for i in range(3):
                    for j in range(3):
                        y[:, c] += padded[:, c, i : i + h, j : j + w] * weight[c, 0, i, j]
        """,
        "eager": """
            padded = torch.nn.functional.pad(x, (1, 1, 1, 1))
            h, w = x.shape[2], x.shape[3]
            acc = torch.zeros_like(x)
            for i in range(3):
                for j in range(3):
                    acc += padded[:, :, i : i + h, j : j + w] * weight[None, :, 0, i, j, None, None]
            y.copy_(acc)
        """,
        "fused": """
            y.copy_(torch.nn.functional.conv2d(x, weight, padding=1, groups=x.shape[1]))
        """,
    },
    "embedding": {
        "naive": """
            for i in range(token_ids.shape[0]):
                y[i] = table[int(token_ids[i])]
        """,
        "eager": """
            y.copy_(table[token_ids])
        """,
        "fused": """
            torch.index_select(table, 0, token_ids, out=y)
        """,
    },
    "scatter_add": {
        "naive": """
            out.zero_()
            for i in range(src.shape[0]):
                out[int(bucket_index[i])] += src[i]
        """,
        "eager": """
            out.copy_(src.new_zeros(out.shape).index_add(0, bucket_index, src))
        """,
        "fused": """
            out.zero_().index_add_(0, bucket_index, src)
        """,
    },
    "rope": {
        "naive": """
            half = x.shape[-1] // 2
            for t in range(x.shape[0]):
                x1, x2 = x[t, :, :half], x[t, :, half:]
                y[t, :, :half] = x1 * cos[t] - x2 * sin[t]
                y[t, :, half:] = x2 * cos[t] + x1 * sin[t]
        """,
        "eager": """
            x1, x2 = x.chunk(2, dim=-1)
            c, s = cos[:, None, :], sin[:, None, :]
            y.copy_(torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1))
        """,
        "fused": """
            half = x.shape[-1] // 2
            x1, x2 = x[..., :half], x[..., half:]
            c, s = cos[:, None, :], sin[:, None, :]
            torch.mul(x1, c, out=y[..., :half])
            y[..., :half].addcmul_(x2, s, value=-1.0)
            torch.mul(x2, c, out=y[..., half:])
            y[..., half:].addcmul_(x1, s)
        """,
    },
    "topk": {
        "naive": """
            for i in range(scores.shape[0]):
                order = torch.argsort(scores[i], descending=True)[:8]
                indices[i] = order
                values[i] = scores[i][order]
        """,
        "eager": """
            v, i = torch.topk(scores, 8, dim=-1)
            values.copy_(v)
            indices.copy_(i)
        """,
        "fused": """
            torch.topk(scores, 8, dim=-1, out=(values, indices))
        """,
    },
    "cumsum": {
        "naive": """
            running = torch.zeros(x.shape[0])
            for j in range(x.shape[1]):
                y[:, j] = running
                running = running + x[:, j]
        """,
        "eager": """
            y.copy_(x.cumsum(-1) - x)
        """,
        "fused": """
            torch.cumsum(x, -1, out=y)
            y.sub_(x)
        """,
    },
    "kl_divergence": {
        "naive": """
            total = torch.zeros(())
            for i in range(student_logits.shape[0]):
                log_p = teacher_logits[i] - torch.logsumexp(teacher_logits[i], 0)
                log_q = student_logits[i] - torch.logsumexp(student_logits[i], 0)
                total += (log_p.exp() * (log_p - log_q)).sum()
            loss.copy_(total / student_logits.shape[0])
        """,
        "eager": """
            log_p = torch.log_softmax(teacher_logits, dim=-1)
            log_q = torch.log_softmax(student_logits, dim=-1)
            loss.copy_((log_p.exp() * (log_p - log_q)).sum(-1).mean())
        """,
        "fused": """
            log_q = torch.log_softmax(student_logits, dim=-1)
            log_p = torch.log_softmax(teacher_logits, dim=-1)
            loss.copy_(torch.nn.functional.kl_div(log_q, log_p, reduction="batchmean", log_target=True))
        """,
    },
    "prenorm_mlp_block": {
        "naive": """
            for i in range(x.shape[0]):
                row = x[i]
                n = row / torch.sqrt((row * row).mean() + 1e-6) * norm_weight
                y[i] = row + (torch.nn.functional.silu(n @ w_gate) * (n @ w_up)) @ w_down
        """,
        "eager": """
            n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * norm_weight
            y.copy_(x + (torch.nn.functional.silu(n @ w_gate) * (n @ w_up)) @ w_down)
        """,
        "fused": """
            n = torch.nn.functional.rms_norm(x, (x.shape[-1],), norm_weight, 1e-6)
            g = n @ w_gate
            torch.nn.functional.silu(g, inplace=True)
            g.mul_(n @ w_up)
            torch.addmm(x, g, w_down, out=y)
        """,
    },
}
