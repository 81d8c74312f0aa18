#!/usr/bin/env python3
"""Builds each fuzz target's seed corpus from the shared test data.

    fuzz/seed_corpus.py TESTDATA OUT      -> OUT/<target>/<seed files>

Real files are large (tokenizer.json up to 11 MB, GGUF vocabularies up to
4 MB); a fuzzer spends its time on small inputs, so the seeds are the same
files cut down to a few KB while staying valid: a few hundred tokens of each
vocabulary (with the merges among them), safetensors files with a few tiny
tensors, chat templates taken out of tokenizer_config.json. Nothing here is
committed; the committed seeds are fuzz/corpus/<target>/ (copied in too).
Standard library only.
"""
import glob
import hashlib
import json
import os
import shutil
import struct
import sys

TD, OUT = sys.argv[1], sys.argv[2]
N_VOCAB = 300  # tokens kept of each vocabulary


def put(target, data, name=None):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    name = name or hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------- safetensors

def safetensors_bytes(header, data):
    h = dumps(header).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


DT_SIZE = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I8": 1, "U8": 1, "I16": 2, "I32": 4, "I64": 8, "BOOL": 1,
           "F8_E4M3": 1, "F8_E5M2": 1}


def seeds_safetensors():
    for path in sorted(glob.glob(f"{TD}/golden/*/hf/model.safetensors") + glob.glob(f"{TD}/stories260K/hf/*.safetensors")):
        raw = open(path, "rb").read()
        (hlen,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8:8 + hlen])
        # The real header with a little of the data (rejected: truncated).
        put("safetensors", raw[:8 + hlen + 64])
        names = [k for k in header if k != "__metadata__"]
        for keep in (1, 3, 8):
            hdr, data = {}, b""
            if "__metadata__" in header:
                hdr["__metadata__"] = header["__metadata__"]
            for i, name in enumerate(names[:keep]):
                dt = header[name]["dtype"]
                shape = [2, 3] if i % 2 else [4]
                n = DT_SIZE[dt] * (6 if i % 2 else 4)
                hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + n]}
                data += bytes((j * 37 + i) & 0xFF for j in range(n))
            put("safetensors", safetensors_bytes(hdr, data))
    # Edge shapes: empty tensors, scalars, every dtype.
    hdr, data = {}, b""
    for i, dt in enumerate(DT_SIZE):
        shape = [[], [0], [1, 0], [3]][i % 4]
        n = DT_SIZE[dt] * (1 if shape == [] else 0 if 0 in shape else 3)
        hdr[f"t.{dt}"] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        data += b"\x01" * n
    put("safetensors", safetensors_bytes(hdr, data))
    put("safetensors", safetensors_bytes({}, b""))


# ---------------------------------------------------------------- GGUF

GG_U8, GG_I8, GG_U16, GG_I16, GG_U32, GG_I32, GG_F32, GG_BOOL, GG_STR, GG_ARR, GG_U64, GG_I64, GG_F64 = range(13)
SCALAR = {GG_U8: "<B", GG_I8: "<b", GG_U16: "<H", GG_I16: "<h", GG_U32: "<I", GG_I32: "<i", GG_F32: "<f",
          GG_BOOL: "<?", GG_U64: "<Q", GG_I64: "<q", GG_F64: "<d"}


class GgufReader:
    def __init__(self, b):
        self.b, self.p = b, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def str(self):
        n = self.take("<Q")
        s = self.b[self.p:self.p + n]
        self.p += n
        return s

    def value(self, t):
        if t == GG_STR:
            return self.str()
        if t == GG_ARR:
            et, n = self.take("<I"), self.take("<Q")
            return (et, [self.value(et) for _ in range(n)])
        return self.take(SCALAR[t])


def gguf_read(path):
    r = GgufReader(open(path, "rb").read())
    assert r.take("<I") == 0x46554747
    version = r.take("<I")
    r.take("<Q")
    kv = []
    for _ in range(r.take("<Q")):
        k = r.str()
        t = r.take("<I")
        kv.append((k, t, r.value(t)))
    return version, kv


def gguf_value(t, v):
    if t == GG_STR:
        return struct.pack("<Q", len(v)) + v
    if t == GG_ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gguf_value(et, x) for x in items)
    return struct.pack(SCALAR[t], v)


def gguf_write(version, kv):
    out = struct.pack("<IIQQ", 0x46554747, version, 0, len(kv))
    for k, t, v in kv:
        out += struct.pack("<Q", len(k)) + k + struct.pack("<I", t) + gguf_value(t, v)
    return out


def seeds_gguf():
    for path in sorted(glob.glob(f"{TD}/tokenizer/llamacpp-vocab/*.gguf")):
        version, kv = gguf_read(path)
        tokens = next((v[1] for k, t, v in kv if k == b"tokenizer.ggml.tokens"), None)
        if tokens is None:
            continue
        n = min(N_VOCAB, len(tokens))
        kept = set(tokens[:n])
        small = []
        for k, t, v in kv:
            if not k.startswith(b"tokenizer.") and k != b"general.architecture":
                continue  # model hyper-parameters: not read by the vocabulary loader
            if k == b"tokenizer.chat_template":
                continue
            if t == GG_ARR and k == b"tokenizer.ggml.merges":
                merges = [m for m in v[1] if m.split(b" ")[0] in kept and b"".join(m.split(b" ", 1)) in kept]
                v = (v[0], merges[:n])
            elif t == GG_ARR and len(v[1]) == len(tokens):
                v = (v[0], v[1][:n])
            elif k.endswith(b"_token_id") and t != GG_ARR and v >= n:
                v = n - 1
            small.append((k, t, v))
        data = gguf_write(version, small)
        put("gguf", data, os.path.basename(path))
    put("gguf", gguf_write(3, []))


# ---------------------------------------------------------------- configs

def seeds_config():
    for path in sorted(glob.glob(f"{TD}/golden/*/hf/*.json") + glob.glob(f"{TD}/stories260K/hf/*.json")):
        put("config", open(path, "rb").read())
    for path in sorted(glob.glob(f"{TD}/tokenizer/hf/*/tokenizer_config.json")):
        cfg = json.load(open(path))
        cfg.pop("chat_template", None)
        dec = cfg.get("added_tokens_decoder")
        if isinstance(dec, dict):
            cfg["added_tokens_decoder"] = dict(list(dec.items())[:4])
        put("config", dumps(cfg))


# ---------------------------------------------------------------- tokenizer.json

def sample_texts(tok_dir, k=2):
    out = []
    p = os.path.join(tok_dir, "cases.jsonl")
    if os.path.exists(p):
        for line in open(p, encoding="utf-8"):
            t = json.loads(line).get("text")
            if isinstance(t, str) and len(t) < 200:
                out.append(t)
            if len(out) >= k:
                break
    return out or ["Hello world"]


def seeds_tokenizer_json():
    for path in sorted(glob.glob(f"{TD}/tokenizer/hf/*/tokenizer.json")):
        j = json.load(open(path, encoding="utf-8"))
        m = j["model"]
        if isinstance(m.get("vocab"), dict):
            vocab = sorted(m["vocab"].items(), key=lambda kv: kv[1])[:N_VOCAB]
            m["vocab"] = dict(vocab)
            kept = set(m["vocab"])
            merges = []
            for e in m.get("merges") or []:
                a, b = e if isinstance(e, list) else e.split(" ", 1)
                if a in kept and b in kept and a + b in kept:
                    merges.append(e)
            m["merges"] = merges
        j["added_tokens"] = (j.get("added_tokens") or [])[:8]
        text = dumps(j)
        put("tokenizer_json", text)
        for t in sample_texts(os.path.dirname(path)):
            put("tokenizer_json", text.encode() + b"\0" + t.encode())
    # The model types the shared data has no file of.
    wp = {"model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                    "max_input_chars_per_word": 100,
                    "vocab": {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "##s",
                                                          "##ing", "un", "##aff", "##able", "!", ","])}},
          "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                         "strip_accents": None, "lowercase": True},
          "pre_tokenizer": {"type": "BertPreTokenizer"},
          "post_processor": {"type": "TemplateProcessing",
                             "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                        {"Sequence": {"id": "A", "type_id": 0}},
                                        {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                             "pair": [], "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                                            "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
          "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
          "added_tokens": [{"id": i, "content": t, "special": True} for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"])]}
    put("tokenizer_json", dumps(wp))
    put("tokenizer_json", dumps(wp).encode() + b"\0Hello, unaffable worlds!")
    ug = {"model": {"type": "Unigram", "unk_id": 0, "byte_fallback": True,
                    "vocab": [["<unk>", 0.0], ["<s>", 0.0], ["</s>", 0.0], ["\u2581", -2.0], ["\u2581hello", -3.0],
                              ["\u2581world", -3.5], ["h", -5.0], ["e", -5.0], ["l", -5.0], ["o", -5.0],
                              ["<0x41>", -9.0], ["<0xC3>", -9.0], ["<0xA9>", -9.0]]},
          "normalizer": {"type": "Sequence", "normalizers": [{"type": "Nmt"}, {"type": "NFKC"},
                                                              {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
          "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
          "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
          "added_tokens": [{"id": 1, "content": "<s>", "special": True}, {"id": 2, "content": "</s>", "special": True}]}
    put("tokenizer_json", dumps(ug))
    put("tokenizer_json", dumps(ug).encode() + b"\0hello  world \xc3\xa9A</s>")


# ---------------------------------------------------------------- chat templates

def seeds_jinja():
    paths = glob.glob(f"{TD}/tokenizer/hf/*/tokenizer_config.json") + glob.glob(f"{TD}/golden/*/hf/tokenizer_config.json")
    for path in sorted(paths):
        t = json.load(open(path, encoding="utf-8")).get("chat_template")
        if isinstance(t, list):  # named templates: [{"name", "template"}]
            t = [x.get("template") for x in t if isinstance(x, dict)]
        for s in (t if isinstance(t, list) else [t]):
            if isinstance(s, str):
                put("jinja", s)
    for path in sorted(glob.glob(f"{TD}/tokenizer/llamacpp-vocab/*.gguf")):
        _, kv = gguf_read(path)
        for k, t, v in kv:
            if k == b"tokenizer.chat_template" and t == GG_STR:
                put("jinja", v)


# ---------------------------------------------------------------- OpenAI requests

def seeds_openai():
    for path in sorted(glob.glob(f"{TD}/tokenizer/hf/*/chat_cases.jsonl")):
        for line in list(open(path, encoding="utf-8"))[:3]:
            case = json.loads(line)
            put("openai", dumps({"model": "m", "messages": case["messages"], "max_tokens": 8}))


here = os.path.dirname(os.path.abspath(__file__))
for target, fn in [("safetensors", seeds_safetensors), ("gguf", seeds_gguf), ("config", seeds_config),
                   ("tokenizer_json", seeds_tokenizer_json), ("jinja", seeds_jinja), ("openai", seeds_openai)]:
    os.makedirs(os.path.join(OUT, target), exist_ok=True)
    fn()
    committed = os.path.join(here, "corpus", target)
    if os.path.isdir(committed):
        for f in sorted(os.listdir(committed)):
            shutil.copyfile(os.path.join(committed, f), os.path.join(OUT, target, "committed-" + f))
    files = os.listdir(os.path.join(OUT, target))
    size = sum(os.path.getsize(os.path.join(OUT, target, f)) for f in files)
    print(f"seed corpus {target}: {len(files)} files, {size} bytes")
