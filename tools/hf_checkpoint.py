"""What the two checkpoint builders run by embedded_vllm share (tools/gguf_to_hf.py, tools/random_audio_checkpoint.py):
one command line (`MODEL.gguf OUT_DIR [--chat-template FILE]`), the packaged GGUF's tokenizer read by transformers'
GGUF loader, and a folder written beside OUT_DIR then renamed into place, so a killed build leaves no half
checkpoint. Runs under the vLLM environment's python."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from transformers import AutoTokenizer


def arguments(description: str) -> tuple[argparse.Namespace, Path]:
    """The parsed command line and the emptied '<OUT_DIR>.partial' folder to build in."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("gguf", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--chat-template", type=Path, default=None, help="Jinja chat template stored with it")
    args = parser.parse_args()
    partial = args.out.with_name(args.out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    return args, partial


def gguf_tokenizer(args: argparse.Namespace):
    """The GGUF's own tokenizer, with the chat template given on the command line."""
    tokenizer = AutoTokenizer.from_pretrained(str(args.gguf.parent), gguf_file=args.gguf.name)
    if args.chat_template is not None:
        tokenizer.chat_template = args.chat_template.read_text(encoding="utf-8")
    return tokenizer


def publish(partial: Path, out: Path) -> None:
    """Put the finished folder in place of OUT_DIR."""
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
