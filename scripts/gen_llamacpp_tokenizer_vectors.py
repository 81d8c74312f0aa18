#!/usr/bin/env python3
"""Writes tests/data/tokenizer_vectors/<vocab>.ids: the token ids llama.cpp's own
tokenizer gives for every string of strings.jsonl, for every ggml-vocab-*.gguf
of the llama.cpp vocab folder. Stdlib only.

  scripts/gen_llamacpp_tokenizer_vectors.py --llama-cpp /path/to/llama.cpp \
      [--build /path/to/llama.cpp/build] [--tool /path/to/llamacpp_tokenize] \
      [--vocab-dir ../shared/testdata/tokenizer/llamacpp-vocab] [--version "..."]

llama.cpp must be built with its static library, e.g.
  cmake -S llama.cpp -B llama.cpp/build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DLLAMA_OPENSSL=OFF \
      -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF
  ninja -C llama.cpp/build llama
The helper scripts/llamacpp_tokenize.cpp is compiled against it (or pass --tool).

Each .ids file: a header line "# llama.cpp <version>", then one line per string
(add_special=false, parse_special=false, as llama.cpp's test-tokenizer-0), each
id preceded by a space; then "# parse_special=true" and, for the strings whose
ids differ with parse_special=true, lines "<index>: <ids>".
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "tests", "data", "tokenizer_vectors")


def build_tool(llama_cpp, build, workdir):
    tool = os.path.join(workdir, "llamacpp_tokenize")
    libs = [os.path.join(build, "src", "libllama.a")]
    ggml = os.path.join(build, "ggml", "src")
    libs += [os.path.join(ggml, n) for n in ("libggml.a", "libggml-cpu.a", "libggml-base.a")]
    cmd = ["g++", "-std=c++17", "-O1", "-I", os.path.join(llama_cpp, "include"),
           "-I", os.path.join(llama_cpp, "ggml", "include"), os.path.join(HERE, "llamacpp_tokenize.cpp"),
           "-o", tool] + libs + ["-lpthread", "-ldl", "-lm"]
    subprocess.run(cmd, check=True)
    return tool


def tokenize(tool, vocab, hex_file, parse_special):
    r = subprocess.run([tool, vocab, hex_file, "1" if parse_special else "0"], check=True,
                       stdout=subprocess.PIPE, universal_newlines=True)
    return r.stdout.split("\n")[:-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp source tree")
    ap.add_argument("--build", help="its build folder (default: <llama-cpp>/build)")
    ap.add_argument("--tool", help="a compiled scripts/llamacpp_tokenize.cpp (default: compile it)")
    ap.add_argument("--vocab-dir", default=os.path.join(ROOT, "..", "shared", "testdata", "tokenizer", "llamacpp-vocab"))
    ap.add_argument("--version", help="how to name the llama.cpp used (default: its git commit)")
    a = ap.parse_args()
    version = a.version or subprocess.run(["git", "-C", a.llama_cpp, "rev-parse", "HEAD"], check=True,
                                          stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()
    with open(os.path.join(OUT, "strings.jsonl"), encoding="ascii") as f:
        strings = [json.loads(line) for line in f]
    vocabs = sorted(n[len("ggml-vocab-"):-len(".gguf")] for n in os.listdir(a.vocab_dir)
                    if n.startswith("ggml-vocab-") and n.endswith(".gguf"))
    if not vocabs:
        sys.exit("no ggml-vocab-*.gguf in " + a.vocab_dir)
    with tempfile.TemporaryDirectory() as tmp:
        tool = a.tool or build_tool(a.llama_cpp, a.build or os.path.join(a.llama_cpp, "build"), tmp)
        hex_file = os.path.join(tmp, "strings.hex")
        with open(hex_file, "w") as f:
            for s in strings:
                f.write(s.encode("utf-8").hex() + "\n")
        for v in vocabs:
            gguf = os.path.join(a.vocab_dir, "ggml-vocab-%s.gguf" % v)
            plain = tokenize(tool, gguf, hex_file, False)
            special = tokenize(tool, gguf, hex_file, True)
            if len(plain) != len(strings) or len(special) != len(strings):
                sys.exit("%s: %d / %d lines for %d strings" % (v, len(plain), len(special), len(strings)))
            with open(os.path.join(OUT, v + ".ids"), "w", newline="\n") as f:
                f.write("# llama.cpp %s\n" % version)
                f.writelines(line + "\n" for line in plain)
                f.write("# parse_special=true\n")
                f.writelines("%d:%s\n" % (i, s) for i, (p, s) in enumerate(zip(plain, special)) if p != s)
            print("%s: %d strings, %d differ with parse_special" % (v, len(strings),
                                                                   sum(p != s for p, s in zip(plain, special))))


if __name__ == "__main__":
    main()
