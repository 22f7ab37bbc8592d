"""Turn a GGUF into a Hugging Face checkpoint with transformers itself, for servers that load only HF weights
(vLLM). Runs under the vLLM environment's python (torch, transformers, gguf, accelerate); no hub access.

    python tools/gguf_to_hf.py MODEL.gguf OUT_DIR [--chat-template FILE]

Weights are dequantized to bf16 (transformers' GGUF loader), so the copy carries the GGUF's information at a
wider type: a Q4_K_M source stays a Q4_K_M model, `derived_from` says so. The GGUF quantizer transformers
attaches while loading is dropped before saving, or vLLM would take the copy for a GGUF-quantized model. The
folder is written beside OUT_DIR and renamed into place, so a killed conversion leaves no half checkpoint.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gguf", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--chat-template", type=Path, default=None, help="Jinja chat template stored with the copy")
    args = parser.parse_args()
    partial = args.out.with_name(args.out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    folder, name = str(args.gguf.parent), args.gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if args.chat_template is not None:
        tokenizer.chat_template = args.chat_template.read_text(encoding="utf-8")
    model.save_pretrained(partial, safe_serialization=True)
    tokenizer.save_pretrained(partial)
    shutil.rmtree(args.out, ignore_errors=True)
    partial.rename(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
