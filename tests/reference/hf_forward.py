#!/usr/bin/env python3
"""Independent reference forward pass for small Hugging Face checkpoints.

Pure Python (stdlib only: struct, json, math, array), float64 arithmetic on the
checkpoint's weights. It is written from the semantics of the transformers
modeling files, not from rinfer's C++:

  * LlamaForCausalLM, Qwen2ForCausalLM  (modeling_llama.py / modeling_qwen2.py)
  * Qwen3ForCausalLM                    (modeling_qwen3.py: q_norm / k_norm over
                                         each head_dim slice, before RoPE)
  * Qwen3MoeForCausalLM                 (modeling_qwen3_moe.py: softmax router,
                                         top-k, renormalized iff norm_topk_prob;
                                         dense layers per mlp_only_layers /
                                         decoder_sparse_step)
  * Qwen2MoeForCausalLM, MixtralForCausalLM (same router; shared expert x
                                         sigmoid(shared_expert_gate); Mixtral
                                         always renormalizes)
  * GlmForCausalLM, Glm4ForCausalLM     (modeling_glm.py / modeling_glm4.py: fused
                                         gate_up_proj, RoPE on the first
                                         partial_rotary_factor of each head with
                                         adjacent pairs; Glm4 adds
                                         post_self_attn_layernorm and
                                         post_mlp_layernorm on the sub-layer
                                         outputs before each residual add)
  * ChatGLMModel (GLM-4-9B-chat remote code: fused query_key_value and
                  dense_h_to_4h, RoPE base 10000 * rope_ratio on half the head)

Usage:
  hf_forward.py MODEL_DIR --ids 1,2,3 [--out FILE]

Prints (or writes) JSON: {"architecture", "n_vocab", "ids", "logits": one row
per position (causal, positions 0..n-1), "min_router_margin": the smallest gap
between the last chosen and the first rejected expert probability (MoE only)}.
"""

import argparse
import array
import json
import math
import os
import struct
import sys
from operator import mul


# ---------------------------------------------------------------- safetensors

def _decode(dtype, raw):
    if dtype == "F32":
        a = array.array("f")
        a.frombytes(raw)
    elif dtype == "F64":
        a = array.array("d")
        a.frombytes(raw)
    elif dtype == "F16":
        return list(struct.unpack("<%de" % (len(raw) // 2), raw))
    elif dtype == "BF16":
        halves = struct.unpack("<%dH" % (len(raw) // 2), raw)
        a = array.array("f")
        a.frombytes(struct.pack("<%dI" % len(halves), *[h << 16 for h in halves]))
    else:
        raise SystemExit("unsupported safetensors dtype " + dtype)
    if sys.byteorder != "little":
        a.byteswap()
    return a.tolist()


def read_safetensors(path, out):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        flat = _decode(info["dtype"], data[base + b:base + e])
        shape = info["shape"]
        if len(shape) == 2:
            cols = shape[1]
            out[name] = [flat[r * cols:(r + 1) * cols] for r in range(shape[0])]
        else:
            out[name] = flat


def load_checkpoint(model_dir):
    tensors = {}
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    for fn in files:
        read_safetensors(os.path.join(model_dir, fn), tensors)
    return tensors


# ---------------------------------------------------------------- math

def matvec(w, x, bias=None):
    y = [sum(map(mul, row, x)) for row in w]
    if bias is not None:
        y = [a + b for a, b in zip(y, bias)]
    return y


def rmsnorm(x, w, eps):
    # weight * (x * rsqrt(mean(x^2) + eps))
    inv = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [wi * (v * inv) for v, wi in zip(x, w)]


def silu(v):
    return v / (1.0 + math.exp(-v)) if v > -700.0 else 0.0


def softmax(xs):
    m = max(xs)
    e = [math.exp(v - m) for v in xs]
    s = sum(e)
    return [v / s for v in e]


def inv_freqs(base, dim):
    # 1 / base^(2i / dim), i < dim / 2 (transformers' default rope init)
    return [1.0 / (base ** (2 * i / dim)) for i in range(dim // 2)]


def rope_half(x, pos, freqs):
    # rotate_half: dim i pairs with i + dim/2 (LLaMA, Qwen)
    half = len(freqs)
    out = list(x)
    for i in range(half):
        c, s = math.cos(pos * freqs[i]), math.sin(pos * freqs[i])
        a, b = x[i], x[i + half]
        out[i] = a * c - b * s
        out[i + half] = b * c + a * s
    return out


def rope_pairs(x, pos, freqs):
    # GLM: adjacent pairs (2i, 2i+1) over the first 2*len(freqs) dims, rest passes
    out = list(x)
    for i in range(len(freqs)):
        c, s = math.cos(pos * freqs[i]), math.sin(pos * freqs[i])
        a, b = x[2 * i], x[2 * i + 1]
        out[2 * i] = a * c - b * s
        out[2 * i + 1] = b * c + a * s
    return out


# ---------------------------------------------------------------- model spec

class Spec:
    pass


def _get(cfg, key, default=None):
    v = cfg.get(key)
    return default if v is None else v


def build_spec(cfg, t):
    """Map a checkpoint onto one canonical description per layer."""
    arch = cfg["architectures"][0]
    s = Spec()
    s.arch = arch
    s.layers = []
    s.moe_margins = []
    if arch == "ChatGLMModel" or arch == "ChatGLMForConditionalGeneration":
        H = cfg["hidden_size"]
        NH = cfg["num_attention_heads"]
        NKV = cfg["multi_query_group_num"] if cfg.get("multi_query_attention") else NH
        D = _get(cfg, "kv_channels", H // NH)
        s.H, s.NH, s.NKV, s.D = H, NH, NKV, D
        s.eps = _get(cfg, "layernorm_epsilon", 1e-5)
        s.rope = "pairs"
        s.freqs = inv_freqs(10000.0 * _get(cfg, "rope_ratio", 1), D // 2)
        L = _get(cfg, "num_layers", cfg.get("num_hidden_layers"))
        I = cfg["ffn_hidden_size"]
        s.embed = t["transformer.embedding.word_embeddings.weight"]
        s.final_norm = t["transformer.encoder.final_layernorm.weight"]
        s.head = t["transformer.output_layer.weight"]
        qo, ko = NH * D, NKV * D
        for l in range(L):
            p = "transformer.encoder.layers.%d." % l
            w = t[p + "self_attention.query_key_value.weight"]
            b = t.get(p + "self_attention.query_key_value.bias")
            gu = t[p + "mlp.dense_h_to_4h.weight"]
            s.layers.append(dict(
                in_norm=t[p + "input_layernorm.weight"],
                q=w[:qo], k=w[qo:qo + ko], v=w[qo + ko:qo + 2 * ko],
                q_b=b[:qo] if b else None, k_b=b[qo:qo + ko] if b else None,
                v_b=b[qo + ko:qo + 2 * ko] if b else None,
                o=t[p + "self_attention.dense.weight"], o_b=t.get(p + "self_attention.dense.bias"),
                ffn_norm=t[p + "post_attention_layernorm.weight"],
                mlp=("dense", gu[:I], gu[I:], t[p + "mlp.dense_4h_to_h.weight"])))
        return s

    H = cfg["hidden_size"]
    NH = cfg["num_attention_heads"]
    NKV = _get(cfg, "num_key_value_heads", NH)
    D = _get(cfg, "head_dim", H // NH)
    s.H, s.NH, s.NKV, s.D = H, NH, NKV, D
    s.eps = _get(cfg, "rms_norm_eps", 1e-6)
    rs = cfg.get("rope_scaling")
    if rs is not None and rs.get("rope_type", rs.get("type", "default")) != "default":
        raise SystemExit("rope_scaling is not implemented in this reference")
    theta = _get(cfg, "rope_theta", 10000.0)
    glm = arch in ("GlmForCausalLM", "Glm4ForCausalLM")
    if glm:
        rot = int(D * _get(cfg, "partial_rotary_factor", 0.5))
        s.rope = "pairs"
        s.freqs = inv_freqs(theta, rot)
    elif arch in ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                  "Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM", "MixtralForCausalLM"):
        s.rope = "half"
        s.freqs = inv_freqs(theta, D)
    else:
        raise SystemExit("architecture %s is not implemented in this reference" % arch)
    s.embed = t["model.embed_tokens.weight"]
    s.final_norm = t["model.norm.weight"]
    s.head = t["model.embed_tokens.weight"] if _get(cfg, "tie_word_embeddings", False) else t["lm_head.weight"]
    L = cfg["num_hidden_layers"]
    for l in range(L):
        p = "model.layers.%d." % l
        a = p + "self_attn."
        d = dict(in_norm=t[p + "input_layernorm.weight"], ffn_norm=t[p + "post_attention_layernorm.weight"],
                 q=t[a + "q_proj.weight"], k=t[a + "k_proj.weight"], v=t[a + "v_proj.weight"],
                 q_b=t.get(a + "q_proj.bias"), k_b=t.get(a + "k_proj.bias"), v_b=t.get(a + "v_proj.bias"),
                 o=t[a + "o_proj.weight"], o_b=t.get(a + "o_proj.bias"))
        if arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM"):
            d["q_norm"] = t[a + "q_norm.weight"]
            d["k_norm"] = t[a + "k_norm.weight"]
        if arch == "Glm4ForCausalLM":
            d["post_attn_out_norm"] = t[p + "post_self_attn_layernorm.weight"]
            d["post_mlp_out_norm"] = t[p + "post_mlp_layernorm.weight"]
        m = p + "mlp."
        if glm:
            gu = t[m + "gate_up_proj.weight"]
            I = len(gu) // 2
            d["mlp"] = ("dense", gu[:I], gu[I:], t[m + "down_proj.weight"])  # chunk(2): [gate; up]
        elif arch == "MixtralForCausalLM":
            b = p + "block_sparse_moe."
            E = cfg["num_local_experts"]
            d["mlp"] = ("moe", t[b + "gate.weight"],
                        [(t[b + "experts.%d.w1.weight" % e], t[b + "experts.%d.w3.weight" % e],
                          t[b + "experts.%d.w2.weight" % e]) for e in range(E)],
                        cfg["num_experts_per_tok"], True, None)
        elif arch in ("Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM") and \
                l not in _get(cfg, "mlp_only_layers", []) and cfg["num_experts"] > 0 and \
                (l + 1) % _get(cfg, "decoder_sparse_step", 1) == 0:
            E = cfg["num_experts"]
            shared = None
            if arch == "Qwen2MoeForCausalLM":
                shared = ((t[m + "shared_expert.gate_proj.weight"], t[m + "shared_expert.up_proj.weight"],
                           t[m + "shared_expert.down_proj.weight"]), t[m + "shared_expert_gate.weight"])
            d["mlp"] = ("moe", t[m + "gate.weight"],
                        [(t[m + "experts.%d.gate_proj.weight" % e], t[m + "experts.%d.up_proj.weight" % e],
                          t[m + "experts.%d.down_proj.weight" % e]) for e in range(E)],
                        cfg["num_experts_per_tok"], _get(cfg, "norm_topk_prob", False), shared)
        else:
            d["mlp"] = ("dense", t[m + "gate_proj.weight"], t[m + "up_proj.weight"], t[m + "down_proj.weight"],
                        t.get(m + "gate_proj.bias"), t.get(m + "up_proj.bias"), t.get(m + "down_proj.bias"))
        s.layers.append(d)
    return s


# ---------------------------------------------------------------- forward

def gated_mlp(x, gate, up, down, gb=None, ub=None, db=None):
    g = matvec(gate, x, gb)
    u = matvec(up, x, ub)
    return matvec(down, [silu(a) * b for a, b in zip(g, u)], db)


def feed_forward(s, mlp, x):
    if mlp[0] == "dense":
        return gated_mlp(x, *mlp[1:])
    _, router, experts, top_k, renorm, shared = mlp
    probs = softmax(matvec(router, x))
    order = sorted(range(len(probs)), key=lambda e: (-probs[e], e))
    chosen = order[:top_k]
    if top_k < len(order):
        s.moe_margins.append(probs[order[top_k - 1]] - probs[order[top_k]])
    weights = [probs[e] for e in chosen]
    if renorm:
        total = sum(weights)
        weights = [w / total for w in weights]
    out = [0.0] * len(x)
    for e, w in zip(chosen, weights):
        y = gated_mlp(x, *experts[e])
        out = [a + w * b for a, b in zip(out, y)]
    if shared is not None:
        (g, u, dn), sgate = shared
        y = gated_mlp(x, g, u, dn)
        z = matvec(sgate, x)[0]
        sg = 1.0 / (1.0 + math.exp(-z))
        out = [a + sg * b for a, b in zip(out, y)]
    return out


def forward(s, ids):
    D, NH, NKV = s.D, s.NH, s.NKV
    rep = NH // NKV
    scale = 1.0 / math.sqrt(D)
    rope = rope_half if s.rope == "half" else rope_pairs
    xs = [list(s.embed[i]) for i in ids]
    for L in s.layers:
        ks, vs, outs = [], [], []
        qs = []
        for pos, x in enumerate(xs):
            h = rmsnorm(x, L["in_norm"], s.eps)
            q = matvec(L["q"], h, L["q_b"])
            k = matvec(L["k"], h, L["k_b"])
            v = matvec(L["v"], h, L["v_b"])
            qh = [q[j * D:(j + 1) * D] for j in range(NH)]
            kh = [k[j * D:(j + 1) * D] for j in range(NKV)]
            if "q_norm" in L:
                qh = [rmsnorm(a, L["q_norm"], s.eps) for a in qh]
                kh = [rmsnorm(a, L["k_norm"], s.eps) for a in kh]
            qs.append([rope(a, pos, s.freqs) for a in qh])
            ks.append([rope(a, pos, s.freqs) for a in kh])
            vs.append([v[j * D:(j + 1) * D] for j in range(NKV)])
        new_xs = []
        for pos, x in enumerate(xs):
            attn = []
            for hd in range(NH):
                g = hd // rep  # repeat_kv: query head h uses kv head h // n_rep
                qv = qs[pos][hd]
                sc = softmax([sum(map(mul, qv, ks[j][g])) * scale for j in range(pos + 1)])
                o = [0.0] * D
                for j in range(pos + 1):
                    pj = sc[j]
                    o = [a + pj * b for a, b in zip(o, vs[j][g])]
                attn.extend(o)
            a_out = matvec(L["o"], attn, L["o_b"])
            if "post_attn_out_norm" in L:
                a_out = rmsnorm(a_out, L["post_attn_out_norm"], s.eps)
            x = [a + b for a, b in zip(x, a_out)]
            f = feed_forward(s, L["mlp"], rmsnorm(x, L["ffn_norm"], s.eps))
            if "post_mlp_out_norm" in L:
                f = rmsnorm(f, L["post_mlp_out_norm"], s.eps)
            new_xs.append([a + b for a, b in zip(x, f)])
        xs = new_xs
    return [matvec(s.head, rmsnorm(x, s.final_norm, s.eps)) for x in xs]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--ids", required=True, help="comma-separated token ids")
    ap.add_argument("--out", help="write the JSON here instead of stdout")
    args = ap.parse_args()
    with open(os.path.join(args.model_dir, "config.json")) as f:
        cfg = json.load(f)
    ids = [int(v) for v in args.ids.split(",") if v.strip()]
    spec = build_spec(cfg, load_checkpoint(args.model_dir))
    logits = forward(spec, ids)
    result = {"architecture": spec.arch, "n_vocab": len(logits[0]), "ids": ids, "logits": logits,
              "min_router_margin": min(spec.moe_margins) if spec.moe_margins else None}
    text = json.dumps(result)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
