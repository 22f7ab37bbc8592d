"""Turn a GGUF into a Hugging Face checkpoint with transformers itself, for servers that load only HF weights
(vLLM). Runs under the vLLM environment's python (torch, transformers, gguf, accelerate); no hub access.

    python tools/gguf_to_hf.py MODEL.gguf OUT_DIR [--chat-template FILE]

Weights are dequantized to bf16 (transformers' GGUF loader), so the copy carries the GGUF's information at a
wider type: a Q4_K_M source stays a Q4_K_M model, `derived_from` says so. The GGUF quantizer transformers
attaches while loading is dropped before saving, or vLLM would take the copy for a GGUF-quantized model. The
folder is written beside OUT_DIR and renamed into place, so a killed conversion leaves no half checkpoint.
"""

from __future__ import annotations

import torch
from hf_checkpoint import arguments, gguf_tokenizer, publish
from transformers import AutoModelForCausalLM


def main() -> None:
    args, partial = arguments(__doc__.splitlines()[0])
    tokenizer = gguf_tokenizer(args)
    model = AutoModelForCausalLM.from_pretrained(str(args.gguf.parent), gguf_file=args.gguf.name, dtype=torch.bfloat16)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(partial, safe_serialization=True)
    tokenizer.save_pretrained(partial)
    publish(partial, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
